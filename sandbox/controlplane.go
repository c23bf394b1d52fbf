package sandbox

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"time"
)

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func (in *instance) binary(name string) string { return filepath.Join(in.bin, name) }

func (in *instance) startEtcd(ctx context.Context, _ pki) error {
	client := "http://" + in.addr(portEtcd)
	peer := "http://" + in.addr(portEtcdPeer)
	args := []string{
		"--name", "sandbox",
		"--data-dir", in.path("etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "sandbox=" + peer,
		// A throwaway cluster: skipping fsync makes every write several times faster.
		"--unsafe-no-fsync",
		"--quota-backend-bytes", "4294967296",
		"--log-level", "warn",
	}
	if err := in.launch("etcd", in.binary("etcd"), args); err != nil {
		return err
	}
	return in.waitFor(ctx, "etcd", 30*time.Second, func(ctx context.Context) error {
		return in.get(ctx, client+"/health")
	})
}

func (in *instance) startAPIServer(ctx context.Context, p pki) error {
	args := []string{
		"--etcd-servers", "http://" + in.addr(portEtcd),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(in.port(portAPIServer)),
		// The default reconciler refuses a loopback endpoint for the kubernetes Service.
		"--endpoint-reconciler-type", "none",
		"--tls-cert-file", p.path("apiserver.crt"), "--tls-private-key-file", p.path("apiserver.key"),
		"--client-ca-file", p.path("ca.crt"),
		"--token-auth-file", in.path("tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", p.path("sa.pub"),
		"--service-account-signing-key-file", p.path("sa.key"),
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--allow-privileged",
		"--requestheader-client-ca-file", p.path("front-proxy-ca.crt"),
		"--requestheader-allowed-names", "front-proxy-client",
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", p.path("front-proxy-client.crt"),
		"--proxy-client-key-file", p.path("front-proxy-client.key"),
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--v", "1",
	}
	if err := in.launch("kube-apiserver", in.binary("kube-apiserver"), args); err != nil {
		return err
	}
	return in.waitFor(ctx, "kube-apiserver", 90*time.Second, func(ctx context.Context) error {
		return in.get(ctx, in.env().APIServerURL+"/readyz")
	})
}

func (in *instance) startControllers(ctx context.Context, p pki) error {
	kc := in.path("kubeconfig")
	common := []string{
		"--kubeconfig", kc,
		"--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--bind-address", "127.0.0.1",
		"--leader-elect=false",
		"--v", "1",
	}
	kcm := append([]string{
		"--secure-port", fmt.Sprint(in.port(portControllerManager)),
		"--service-account-private-key-file", p.path("sa.key"),
		"--root-ca-file", p.path("ca.crt"),
		"--use-service-account-credentials=false",
		// Garbage collection of finished Jobs' pods and of Workloads needs these; the
		// node IPAM and cloud controllers have nothing to do here.
		"--controllers", "*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route",
	}, common...)
	if err := in.launch("kube-controller-manager", in.binary("kube-controller-manager"), kcm); err != nil {
		return err
	}
	sched := append([]string{"--secure-port", fmt.Sprint(in.port(portScheduler))}, common...)
	if err := in.launch("kube-scheduler", in.binary("kube-scheduler"), sched); err != nil {
		return err
	}
	for name, port := range map[string]int{"kube-controller-manager": portControllerManager, "kube-scheduler": portScheduler} {
		url := "https://" + in.addr(port) + "/healthz"
		if err := in.waitFor(ctx, name, 60*time.Second, func(ctx context.Context) error { return in.get(ctx, url) }); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}
