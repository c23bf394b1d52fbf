// Tests of the quota-console Helm chart (deploy/helm/quota-console) with a
// real helm (tools/helm) and the test sandbox's real apiserver: lint, render,
// the values schema, a server-side dry run of every object, and install,
// upgrade and uninstall.
package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/sandbox"
	"github.com/openquota/console/sandbox/sandboxtest"
)

const (
	chartDir     = "quota-console"
	everythingOn = "testdata/everything-on.yaml"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBinary is tools/helm's helm, built once per machine into the tools cache
// ($HELM, when set, is used instead).
func helmBinary(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if helmPath = os.Getenv("HELM"); helmPath != "" {
			return
		}
		root, err := sandbox.RepoRoot()
		if err != nil {
			helmErr = err
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command("bash", filepath.Join(root, "tools", "build.sh"), "helm")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("tools/build.sh helm: %v\n%s", err, stderr.String())
			return
		}
		helmPath = strings.TrimSpace(string(out))
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// runHelm runs helm with its own config, cache and data folders, so a test never
// reads or writes the user's.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache", "HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// render runs helm template with the given extra arguments and decodes the objects.
func render(t *testing.T, namespace string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", "qc", chartDir, "--namespace", namespace}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

func decode(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding the rendered manifests: %v", err)
		}
		if len(obj) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: obj})
		}
	}
	return objs
}

// placed names each object with its namespace: "Kind namespace/name", or
// "Kind name" for a cluster-scoped one.
func placed(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		name := o.GetName()
		if ns := o.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		out = append(out, o.GetKind()+" "+name)
	}
	sort.Strings(out)
	return out
}

// sharedRoles are the cluster-wide objects of rbac.sharedRoles.
var sharedRoles = []string{
	"ClusterRole quota-console-admin", "ClusterRole quota-console-team-member", "ClusterRole quota-console-viewer",
	"ValidatingAdmissionPolicy quota-console-admin-scope", "ValidatingAdmissionPolicyBinding quota-console-admin-scope",
}

// consoleRBAC are the console's own RBAC objects for a release named qc
// (rbac.create), with the state in stateNS.
func consoleRBAC(stateNS string) []string {
	out := []string{"ClusterRole qc-quota-console", "ClusterRoleBinding qc-quota-console", "ClusterRoleBinding qc-quota-console-writes"}
	for _, r := range []string{"Role", "RoleBinding"} {
		out = append(out, r+" kueue-system/qc-quota-console-read-kueue-config", r+" "+stateNS+"/qc-quota-console-state",
			r+" "+stateNS+"/qc-quota-console-leader-election", r+" default/qc-quota-console-events")
	}
	return out
}

func sorted(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	sort.Strings(out)
	return out
}

// typed converts the one object of a kind into its Go type.
func typed[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) *T {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		return &v
	}
	t.Fatalf("no %s rendered", kind)
	return nil
}

func TestChartLints(t *testing.T) {
	for _, values := range [][]string{nil, {"--values", everythingOn}} {
		if out, err := runHelm(t, append([]string{"lint", "--strict", chartDir}, values...)...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

func TestChartDefaults(t *testing.T) {
	objs := render(t, "quota-console")
	want := sorted([]string{
		"Deployment quota-console/qc-quota-console", "PodDisruptionBudget quota-console/qc-quota-console",
		"Service quota-console/qc-quota-console", "ServiceAccount quota-console/qc-quota-console",
		"Secret quota-console/qc-quota-console-session-key",
	}, sharedRoles, consoleRBAC("quota-console"))
	if diff := cmp.Diff(want, placed(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	d := typed[appsv1.Deployment](t, objs, "Deployment")
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas %d, want 2", *d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	selector := d.Spec.Selector.MatchLabels

	// Spread across nodes: a topology spread and a soft anti-affinity, both on
	// the hostname and the Deployment's own pods.
	wantSpread := []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
	}}
	if diff := cmp.Diff(wantSpread, pod.TopologySpreadConstraints); diff != "" {
		t.Errorf("topology spread (-want +got):\n%s", diff)
	}
	wantAnti := &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
		Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
			TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
		},
	}}}
	if pod.Affinity == nil || !cmp.Equal(wantAnti, pod.Affinity.PodAntiAffinity) {
		t.Errorf("anti-affinity: %s", cmp.Diff(wantAnti, pod.Affinity))
	}

	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	wantArgs := []string{"--listen=:8080", "--metrics-listen=:8081", "--log-level=info", "--memory-limit-mib=208", "--log-format=json", "--auth=token", "--namespace-prefix=hyperpod-ns-", "--team-pod-security=baseline",
		"--session-key-file=/etc/quota-console/session-key/key", "--state-namespace=quota-console",
		"--leader-election-lease=qc-quota-console-leader", "--history-store=none", "--history-retention=2160h"}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if c.Image != "quota-console:0.1.0" {
		t.Errorf("image %q, want the chart's appVersion as tag", c.Image)
	}
	// The pages' port, and the metrics port: /metrics with the figures of
	// the cluster, which name every team.
	if len(c.Ports) != 2 || c.Ports[0].ContainerPort != 8080 || c.Ports[0].Name != "http" ||
		c.Ports[1].ContainerPort != 8081 || c.Ports[1].Name != "metrics" {
		t.Errorf("ports %+v, want http 8080 and metrics 8081", c.Ports)
	}
	for name, probe := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"liveness": {c.LivenessProbe, "/healthz"}, "readiness": {c.ReadinessProbe, "/readyz"}} {
		if probe.p == nil || probe.p.HTTPGet == nil || probe.p.HTTPGet.Path != probe.path || probe.p.HTTPGet.Port.StrVal != "http" {
			t.Errorf("%s probe %+v, want GET %s on port http", name, probe.p, probe.path)
		}
	}
	// From the load benchmark; no CPU limit.
	wantResources := map[string]string{"requests.cpu": "100m", "requests.memory": "256Mi", "limits.memory": "512Mi"}
	gotResources := map[string]string{}
	for name, q := range c.Resources.Requests {
		gotResources["requests."+string(name)] = q.String()
	}
	for name, q := range c.Resources.Limits {
		gotResources["limits."+string(name)] = q.String()
	}
	if diff := cmp.Diff(wantResources, gotResources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}

	// Restricted Pod Security, in the pod and the container.
	psc := pod.SecurityContext
	if psc == nil || !deref(psc.RunAsNonRoot) || deref(psc.RunAsUser) != 65532 || psc.SeccompProfile == nil ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v", psc)
	}
	sc := c.SecurityContext
	if sc == nil || !deref(sc.RunAsNonRoot) || deref(sc.RunAsUser) != 65532 || !deref(sc.ReadOnlyRootFilesystem) ||
		deref(sc.AllowPrivilegeEscalation) || sc.Capabilities == nil || !cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		len(sc.Capabilities.Add) != 0 || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext %+v", sc)
	}
	// A read-only root needs a writable /tmp; the session key is the chart's Secret.
	if len(c.VolumeMounts) != 2 || c.VolumeMounts[0].MountPath != "/tmp" || len(pod.Volumes) != 2 || pod.Volumes[0].EmptyDir == nil ||
		pod.Volumes[1].Secret == nil || pod.Volumes[1].Secret.SecretName != "qc-quota-console-session-key" {
		t.Errorf("volumes %+v, mounts %+v; want an emptyDir on /tmp and the session key", pod.Volumes, c.VolumeMounts)
	}
	if pod.ServiceAccountName != "qc-quota-console" {
		t.Errorf("service account %q", pod.ServiceAccountName)
	}

	pdb := typed[struct {
		Spec struct {
			MinAvailable int `json:"minAvailable"`
		} `json:"spec"`
	}](t, objs, "PodDisruptionBudget")
	if pdb.Spec.MinAvailable != 1 {
		t.Errorf("PodDisruptionBudget minAvailable %d, want 1", pdb.Spec.MinAvailable)
	}
	svc := typed[corev1.Service](t, objs, "Service")
	if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.StrVal != "http" ||
		svc.Spec.Ports[1].Name != "metrics" || svc.Spec.Ports[1].Port != 8081 || svc.Spec.Ports[1].TargetPort.StrVal != "metrics" ||
		!cmp.Equal(svc.Spec.Selector, selector) {
		t.Errorf("service %+v", svc.Spec)
	}
}

// checkSessionKey wants the chart's key: 64 letters and digits, which the
// console reads whole (it trims white space around the key file).
func checkSessionKey(t *testing.T, key []byte) {
	t.Helper()
	if !regexp.MustCompile(`^[A-Za-z0-9]{64}$`).Match(key) {
		t.Errorf("session key %q, want 64 letters and digits", key)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func TestChartEverythingOn(t *testing.T) {
	objs := render(t, "quota-console", "--values", everythingOn)
	want := sorted([]string{
		"Deployment quota-console/qc-quota-console", "Ingress quota-console/qc-quota-console", "Namespace quota-console",
		"NetworkPolicy quota-console/qc-quota-console", "PersistentVolumeClaim quota-console/qc-quota-console-history",
		"Secret quota-console/qc-quota-console-session-key",
		"Service quota-console/qc-quota-console", "ServiceAccount quota-console/qc-quota-console",
		"ServiceMonitor quota-console/qc-quota-console", "PrometheusRule quota-console/qc-quota-console",
		"ConfigMap quota-console/qc-quota-console-dashboard",
	}, sharedRoles, consoleRBAC("console-state"))
	if diff := cmp.Diff(want, placed(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	d := typed[appsv1.Deployment](t, objs, "Deployment")
	c := d.Spec.Template.Spec.Containers[0]
	wantArgs := []string{
		"--listen=0.0.0.0:9090", "--metrics-listen=:8081", "--log-level=debug", "--memory-limit-mib=512", "--log-format=text", "--auth=proxy",
		"--prometheus-url=http://prometheus-operated.monitoring.svc:9090", "--namespace-prefix=team-", "--cluster-name=ml-research", "--cohort=research", "--team-pod-security=restricted",
		"--auth-proxy-user-header=X-Auth-Request-User", "--auth-proxy-groups-header=X-Auth-Request-Groups",
		"--auth-proxy-cidrs=10.0.0.0/8", "--auth-proxy-hosts=quota.example.com", "--auth-proxy-secret-file=/etc/quota-console/proxy-secret/shared",
		"--secure-cookies", "--session-key-file=/etc/quota-console/session-key/key", "--state-namespace=console-state",
		"--leader-election-lease=quota-console-leader", "--history-store=sqlite",
		"--history-path=/var/lib/quota-console/history.db", "--history-retention=2160h", "--some-future-flag=1",
	}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	// One replica on a SQLite file: the old pod stops before the new one
	// opens the file, and no disruption budget keeps a drain waiting
	// (above: no PodDisruptionBudget).
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %q with SQLite's one replica, want Recreate", d.Spec.Strategy.Type)
	}
	if c.Image != "registry.example.com/team/quota-console@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
		t.Errorf("image %q, want pinned by digest", c.Image)
	}
	if c.Ports[0].ContainerPort != 9090 {
		t.Errorf("container port %d, want the port of listen", c.Ports[0].ContainerPort)
	}
	// Each file a flag names is mounted from where the values say.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	sources := map[string]string{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		switch {
		case v.Secret != nil:
			sources[v.Name] = "secret " + v.Secret.SecretName + " " + v.Secret.Items[0].Key
		case v.PersistentVolumeClaim != nil:
			sources[v.Name] = "claim " + v.PersistentVolumeClaim.ClaimName
		case v.EmptyDir != nil:
			sources[v.Name] = "emptyDir"
		}
	}
	wantMounts := map[string]string{
		"tmp": "/tmp", "proxy-secret": "/etc/quota-console/proxy-secret",
		"session-key": "/etc/quota-console/session-key", "history": "/var/lib/quota-console",
	}
	wantSources := map[string]string{
		"tmp": "emptyDir", "proxy-secret": "secret proxy-shared-secret shared",
		"session-key": "secret qc-quota-console-session-key key", "history": "claim qc-quota-console-history",
	}
	if diff := cmp.Diff(wantMounts, mounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSources, sources); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	key := typed[corev1.Secret](t, objs, "Secret")
	checkSessionKey(t, key.Data["key"])

	// Prometheus scrapes the metrics port (the figures of the cluster),
	// which the NetworkPolicy opens to metricsFrom only.
	np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy")
	var rules []string
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			for _, f := range r.From {
				rules = append(rules, p.Port.StrVal+" from "+f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
			}
		}
	}
	if diff := cmp.Diff([]string{"http from ingress-nginx", "metrics from monitoring"}, rules); diff != "" {
		t.Errorf("NetworkPolicy ingress (-want +got):\n%s", diff)
	}
	sm := typed[struct {
		Spec struct {
			Endpoints []struct{ Port, Path string }
		}
	}](t, objs, "ServiceMonitor")
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want /metrics on port metrics", sm.Spec.Endpoints)
	}
}

// Values map to flags: the Lease and the history store always (off by
// default), the others only when set.
func TestChartArgs(t *testing.T) {
	head := func(auth string) []string {
		return []string{"--listen=:8080", "--metrics-listen=:8081", "--log-level=info", "--memory-limit-mib=208", "--log-format=json", "--auth=" + auth, "--namespace-prefix=hyperpod-ns-", "--team-pod-security=baseline"}
	}
	state := []string{"--session-key-file=/etc/quota-console/session-key/key", "--state-namespace=qc"}
	// tail is the lease and the history flags, last.
	tail := func(lease string, history ...string) []string {
		if history == nil {
			history = []string{"--history-store=none"}
		}
		return append(append([]string{"--leader-election-lease=" + lease}, history...), "--history-retention=2160h")
	}
	defaults := tail("qc-quota-console-leader")
	join := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	proxyHeaders := []string{"--auth-proxy-user-header=X-Forwarded-User", "--auth-proxy-groups-header=X-Forwarded-Groups"}
	for _, tc := range []struct {
		name string
		set  []string
		want []string
	}{
		{"token with audience", []string{"auth.token.audience=quota-console"},
			join(head("token"), []string{"--auth-token-audience=quota-console"}, state, defaults)},
		{"proxy sidecar: default CIDRs, no secret", []string{"auth.mode=proxy"},
			join(head("proxy"), proxyHeaders, []string{"--auth-proxy-cidrs=127.0.0.1/32,::1/128"}, state, defaults)},
		{"proxy sidecar for the chart's Ingress: its hosts are the proxy's", []string{"auth.mode=proxy", "ingress.enabled=true"},
			join(head("proxy"), proxyHeaders, []string{"--auth-proxy-cidrs=127.0.0.1/32,::1/128", "--auth-proxy-hosts=quota-console.example.com"}, state, defaults)},
		{"proxy of named hosts", []string{"auth.mode=proxy", "auth.proxy.hosts={quota.example.com,quota.internal}", "ingress.enabled=true"},
			join(head("proxy"), proxyHeaders, []string{"--auth-proxy-cidrs=127.0.0.1/32,::1/128", "--auth-proxy-hosts=quota.example.com,quota.internal"}, state, defaults)},
		{"proxy trusted by secret only", []string{"auth.mode=proxy", "auth.proxy.cidrs=null", "auth.proxy.secret.existingSecret=s"},
			join(head("proxy"), proxyHeaders, []string{"--auth-proxy-cidrs=", "--auth-proxy-secret-file=/etc/quota-console/proxy-secret/secret"}, state, defaults)},
		{"behind the chart's Ingress: its controller's private ranges name the client", []string{"ingress.enabled=true"},
			join(head("token"), []string{"--trusted-proxy-cidrs=10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"}, state, defaults)},
		{"behind the chart's Ingress, no proxy trusted", []string{"ingress.enabled=true", "--set-json=auth.trustedProxyCIDRs=[]"},
			join(head("token"), state, defaults)},
		{"a proxy of one's own", []string{"auth.trustedProxyCIDRs={10.244.0.0/16}"},
			join(head("token"), []string{"--trusted-proxy-cidrs=10.244.0.0/16"}, state, defaults)},
		{"prefix, cluster name and cohort", []string{"namespacePrefix=team-", "clusterName=ml-research", "cohort=research"},
			join([]string{"--listen=:8080", "--metrics-listen=:8081", "--log-level=info", "--memory-limit-mib=208", "--log-format=json", "--auth=token", "--namespace-prefix=team-", "--cluster-name=ml-research", "--cohort=research",
				"--team-pod-security=baseline"}, state, defaults)},
		{"restricted team namespaces", []string{"teamNamespaces.podSecurity=restricted"},
			join([]string{"--listen=:8080", "--metrics-listen=:8081", "--log-level=info", "--memory-limit-mib=208", "--log-format=json", "--auth=token", "--namespace-prefix=hyperpod-ns-",
				"--team-pod-security=restricted"}, state, defaults)},
		{"no session key: a random key per process", []string{"sessionKey.enabled=false"},
			join(head("token"), []string{"--state-namespace=qc"}, defaults)},
		{"state elsewhere", []string{"stateNamespace=console-state"},
			join(head("token"), []string{"--session-key-file=/etc/quota-console/session-key/key", "--state-namespace=console-state"}, defaults)},
		{"leader election lease", []string{"leaderElection.lease=leader"},
			join(head("token"), state, tail("leader"))},
		{"postgres history", []string{"history.store=postgres", "history.postgres.existingSecret=history-db"},
			join(head("token"), state, tail("qc-quota-console-leader", "--history-store=postgres", "--history-dsn-file=/etc/quota-console/history/dsn"))},
		{"no metrics port: the figures of the cluster not served", []string{"metricsPort=0"},
			join([]string{"--listen=:8080", "--log-level=info", "--memory-limit-mib=208", "--log-format=json", "--auth=token", "--namespace-prefix=hyperpod-ns-",
				"--team-pod-security=baseline"}, state, defaults)},
		{"sqlite history on an emptyDir", []string{"replicas=1", "history.store=sqlite", "history.sqlite.path=/data/h.db"},
			join(head("token"), state, tail("qc-quota-console-leader", "--history-store=sqlite", "--history-path=/data/h.db"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				if strings.HasPrefix(s, "--") { // another helm flag, such as --set-json
					args = append(args, s)
					continue
				}
				args = append(args, "--set", s)
			}
			d := typed[appsv1.Deployment](t, render(t, "qc", args...), "Deployment")
			if diff := cmp.Diff(tc.want, d.Spec.Template.Spec.Containers[0].Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

// Attack: the Service made a load balancer (or a NodePort) for the pages
// would publish the metrics port too, whose /metrics names every team's
// figures without sign-in. The metrics port stays on a ClusterIP Service.
func TestChartKeepsMetricsInsideTheCluster(t *testing.T) {
	for _, kind := range []string{"LoadBalancer", "NodePort"} {
		objs := render(t, "qc", "--set", "service.type="+kind)
		ports := map[string][]string{} // Service → its type and ports
		for _, o := range objs {
			if o.GetKind() != "Service" {
				continue
			}
			var svc corev1.Service
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &svc); err != nil {
				t.Fatal(err)
			}
			ports[svc.Name] = []string{string(svc.Spec.Type)}
			for _, p := range svc.Spec.Ports {
				ports[svc.Name] = append(ports[svc.Name], p.Name)
			}
		}
		want := map[string][]string{"qc-quota-console": {kind, "http"}, "qc-quota-console-metrics": {"ClusterIP", "metrics"}}
		if diff := cmp.Diff(want, ports); diff != "" {
			t.Errorf("service.type=%s: Services (-want +got):\n%s", kind, diff)
		}
	}
}

// auth.mode=proxy with an authenticating proxy as a sidecar: the Service
// (and so the Ingress) and the NetworkPolicy reach the proxy, which reaches
// the console on loopback; the console takes its word for the Ingress's
// host only.
func TestChartPutsAProxySidecarInFront(t *testing.T) {
	objs := render(t, "qc", "--values", "examples/oauth2-proxy-sidecar.yaml")
	d := typed[appsv1.Deployment](t, objs, "Deployment")
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 2 || pod.Containers[1].Name != "oauth2-proxy" || pod.Containers[1].Ports[0].Name != "proxy" {
		t.Fatalf("containers %+v, want the console and the oauth2-proxy sidecar", pod.Containers)
	}
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "oauth2-proxy" && v.Secret != nil }) {
		t.Errorf("volumes %+v, want the sidecar's", pod.Volumes)
	}
	args := pod.Containers[0].Args
	for _, want := range []string{"--auth=proxy", "--auth-proxy-cidrs=127.0.0.1/32,::1/128", "--auth-proxy-hosts=quota.example.com"} {
		if !slices.Contains(args, want) {
			t.Errorf("console args %q lack %s", args, want)
		}
	}
	svc := typed[corev1.Service](t, objs, "Service")
	if tp := svc.Spec.Ports[0].TargetPort.String(); tp != "proxy" {
		t.Errorf("the Service sends to %q, want the proxy's port", tp)
	}
	np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy")
	if p := np.Spec.Ingress[0].Ports[0].Port; p == nil || p.String() != "proxy" {
		t.Errorf("the NetworkPolicy opens %v, want the proxy's port only", p)
	}
}

// A private authority's certificate for PostgreSQL's sslmode=verify-full is
// mounted from the DSN's Secret, next to the DSN.
func TestChartMountsThePostgresCA(t *testing.T) {
	for _, tc := range []struct {
		caKey string
		want  []corev1.KeyToPath
	}{
		{"", []corev1.KeyToPath{{Key: "dsn", Path: "dsn"}}},
		{"ca.crt", []corev1.KeyToPath{{Key: "dsn", Path: "dsn"}, {Key: "ca.crt", Path: "ca.crt"}}},
	} {
		d := typed[appsv1.Deployment](t, render(t, "qc", "--set", "history.store=postgres", "--set", "history.postgres.existingSecret=db",
			"--set", "history.postgres.caKey="+tc.caKey), "Deployment")
		var got []corev1.KeyToPath
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == "history-dsn" {
				got = v.Secret.Items
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("caKey %q: the history Secret's files (-want +got):\n%s", tc.caKey, diff)
		}
	}
}

// Behind the chart's Ingress with TLS the browser speaks HTTPS while the pod
// sees plain HTTP: cookies must be Secure (and the console then sends HSTS)
// without anyone remembering secureCookies.
func TestChartSecureCookiesFollowIngressTLS(t *testing.T) {
	ingress := []string{"--set", "ingress.enabled=true"}
	tls := []string{"--set", "ingress.tls[0].secretName=quota-console-tls", "--set", "ingress.tls[0].hosts[0]=quota-console.example.com"}
	for _, tc := range []struct {
		name string
		args []string
		want bool
	}{
		{"no Ingress", nil, false},
		{"Ingress without TLS", ingress, false},
		{"Ingress with TLS", append(append([]string{}, ingress...), tls...), true},
		{"TLS listed but no Ingress", tls, false},
		{"secureCookies set", []string{"--set", "secureCookies=true"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := typed[appsv1.Deployment](t, render(t, "qc", tc.args...), "Deployment")
			got := false
			for _, a := range d.Spec.Template.Spec.Containers[0].Args {
				got = got || a == "--secure-cookies"
			}
			if got != tc.want {
				t.Errorf("--secure-cookies passed: %v, want %v (args %q)", got, tc.want, d.Spec.Template.Spec.Containers[0].Args)
			}
		})
	}
}

// The RBAC values choose which roles render, where, and what they name.
func TestChartRBAC(t *testing.T) {
	release := []string{
		"Deployment qc/qc-quota-console", "PodDisruptionBudget qc/qc-quota-console", "Secret qc/qc-quota-console-session-key",
		"Service qc/qc-quota-console", "ServiceAccount qc/qc-quota-console",
	}
	inDefault := []string{
		"Deployment default/qc-quota-console", "PodDisruptionBudget default/qc-quota-console", "Secret default/qc-quota-console-session-key",
		"Service default/qc-quota-console", "ServiceAccount default/qc-quota-console",
	}
	for _, tc := range []struct {
		name      string
		namespace string
		set       []string
		want      []string
	}{
		{"no RBAC", "qc", []string{"rbac.create=false"}, sorted(release)},
		{"a second release: the console's roles only", "qc", []string{"rbac.sharedRoles=false"}, sorted(release, consoleRBAC("qc"))},
		{"shared roles need rbac.create", "qc", []string{"rbac.create=false", "rbac.sharedRoles=true"}, sorted(release)},
		{"release in default: one events Role", "default", nil, sorted(inDefault, sharedRoles, consoleRBAC("default"))},
		{"state elsewhere", "qc", []string{"stateNamespace=console-state"}, sorted(release, sharedRoles, consoleRBAC("console-state"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			if diff := cmp.Diff(tc.want, placed(render(t, tc.namespace, args...))); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}

	find := func(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
		t.Helper()
		for _, o := range objs {
			if o.GetKind() == kind && o.GetName() == name {
				return o
			}
		}
		t.Fatalf("no %s %s rendered", kind, name)
		return nil
	}
	t.Run("admin scope follows namespacePrefix, cohort and teamNamespaces.podSecurity", func(t *testing.T) {
		for _, tc := range []struct {
			set  []string
			want map[string]any
		}{
			// The defaults are the console's own: --namespace-prefix, --cohort and --team-pod-security unset.
			{nil, map[string]any{"prefix": "'" + domain.DefaultSettings.NamespacePrefix + "'", "cohort": "'" + domain.DefaultSettings.Cohort + "'",
				"podSecurity": "'" + domain.DefaultPodSecurity + "'"}},
			{[]string{"namespacePrefix=team-", "cohort=research", "teamNamespaces.podSecurity=restricted"},
				map[string]any{"prefix": "'team-'", "cohort": "'research'", "podSecurity": "'restricted'"}},
		} {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			policy := find(render(t, "qc", args...), "ValidatingAdmissionPolicy", "quota-console-admin-scope")
			vars, _, _ := unstructured.NestedSlice(policy.Object, "spec", "variables")
			got := map[string]any{}
			for _, v := range vars {
				if name := v.(map[string]any)["name"].(string); tc.want[name] != nil {
					got[name] = v.(map[string]any)["expression"]
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%v: the policy's variables (-want +got):\n%s", tc.set, diff)
			}
		}
	})
	t.Run("the Lease the console may renew", func(t *testing.T) {
		for lease, want := range map[string]string{"": "qc-quota-console-leader", "console-leader": "console-leader"} {
			var args []string
			if lease != "" {
				args = []string{"--set", "leaderElection.lease=" + lease}
			}
			role := typed[rbacv1.Role](t, []*unstructured.Unstructured{find(render(t, "qc", args...), "Role", "qc-quota-console-leader-election")}, "Role")
			wantRules := []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{want}, Verbs: []string{"get", "update"}},
			}
			if diff := cmp.Diff(wantRules, role.Rules); diff != "" {
				t.Errorf("lease %q (-want +got):\n%s", lease, diff)
			}
		}
	})
	t.Run("bindings name the ServiceAccount the pods run as", func(t *testing.T) {
		objs := render(t, "qc", "--set", "serviceAccount.create=false", "--set", "serviceAccount.name=console")
		d := typed[appsv1.Deployment](t, objs, "Deployment")
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: d.Spec.Template.Spec.ServiceAccountName, Namespace: "qc"}}
		for _, o := range objs {
			if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
				continue
			}
			b := typed[rbacv1.RoleBinding](t, []*unstructured.Unstructured{o}, o.GetKind())
			if diff := cmp.Diff(want, b.Subjects); diff != "" {
				t.Errorf("%s %s subjects (-want +got):\n%s", o.GetKind(), o.GetName(), diff)
			}
		}
		if want[0].Name != "console" {
			t.Errorf("pods run as %q, want console", want[0].Name)
		}
	})
}

// A wrong value fails helm template (and so install and upgrade) with a
// message that names it.
func TestChartRejectsWrongValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want []string // all in the error
	}{
		{"replicas below 1", []string{"replicas=0"}, []string{"replicas", "minimum"}},
		{"replicas not a number", []string{"replicas=two"}, []string{"replicas", "integer"}},
		{"auth mode none", []string{"auth.mode=none"}, []string{"auth", "mode", "token", "proxy"}},
		{"unknown auth mode", []string{"auth.mode=ldap"}, []string{"auth", "mode"}},
		{"bad log level", []string{"logLevel=verbose"}, []string{"logLevel", "debug"}},
		{"bad log format", []string{"logFormat=xml"}, []string{"logFormat"}},
		{"empty namespace prefix", []string{"namespacePrefix="}, []string{"namespacePrefix"}},
		{"namespace prefix with a quote", []string{"namespacePrefix=a'b"}, []string{"namespacePrefix"}},
		{"rbac.create not a boolean", []string{"rbac.create=yes"}, []string{"rbac", "boolean"}},
		{"misspelled rbac value", []string{"rbac.shared=false"}, []string{"shared"}},
		{"misspelled value", []string{"replica=3"}, []string{"replica"}},
		{"listen without a port", []string{"listen=0.0.0.0"}, []string{"listen"}},
		{"history store unknown", []string{"history.store=mysql"}, []string{"history", "store"}},
		{"bad image digest", []string{"image.digest=latest"}, []string{"digest"}},
		{"secure cookies not a boolean", []string{"secureCookies=maybe"}, []string{"secureCookies", "boolean"}},
		{"privileged team namespaces", []string{"teamNamespaces.podSecurity=privileged"}, []string{"podSecurity"}},
		{"proxy trusting nobody", []string{"auth.mode=proxy", "auth.proxy.cidrs=null"},
			[]string{"auth.mode proxy needs auth.proxy.cidrs or auth.proxy.secret.existingSecret"}},
		{"audience without token mode", []string{"auth.mode=proxy", "auth.token.audience=x"},
			[]string{"auth.token.audience is only used with auth.mode token"}},
		{"postgres without its Secret", []string{"history.store=postgres"},
			[]string{"history.store postgres needs history.postgres.existingSecret"}},
		// SQLite is a file one process writes: two replicas would each keep
		// their own (emptyDir) or share one on a network volume (corruption).
		{"sqlite with two replicas", []string{"history.store=sqlite"}, []string{"replicas"}},
		{"sqlite claim shared by replicas", []string{"history.store=sqlite", "history.sqlite.persistence.enabled=true",
			"history.sqlite.persistence.accessModes={ReadWriteMany}"}, []string{"replicas"}},
		{"metrics on the pages' port", []string{"metricsPort=8080"}, []string{"metricsPort must differ from the port of listen"}},
		{"alert window not a duration", []string{"alerts.idleGPUs.window=an hour"}, []string{"idleGPUs", "window"}},
		{"alert duration of two units", []string{"alerts.sustainedBorrowing.window=1h30m"}, []string{"sustainedBorrowing", "window"}},
		{"utilization above 100", []string{"alerts.idleGPUs.utilizationPercent=150"}, []string{"utilizationPercent"}},
		{"long wait of a class not a duration", []string{"alerts.longWait.byClass.inference=soon"}, []string{"byClass"}},
		{"misspelled alert", []string{"alerts.idleGPU.enabled=false"}, []string{"idleGPU"}},
		{"dashboard label value with a space", []string{"grafanaDashboard.labelValue=a b"}, []string{"labelValue"}},
		{"sqlite on a ReadWriteMany claim", []string{"replicas=1", "history.store=sqlite", "history.sqlite.persistence.enabled=true",
			"history.sqlite.persistence.accessModes={ReadWriteMany}"}, []string{"accessModes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "qc", chartDir}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			_, err := runHelm(t, args...)
			if err == nil {
				t.Fatalf("helm template accepted %v", tc.set)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// testCluster is the sandbox's apiserver with clients for the chart's objects.
type testCluster struct {
	kubeconfig string
	cfg        *rest.Config
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	mapper     *restmapper.DeferredDiscoveryRESTMapper
	warnings   *warningRecorder
}

// warningRecorder keeps the apiserver's warnings (PodSecurity's among them).
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

func cluster(t *testing.T) *testCluster {
	t.Helper()
	env := sandboxtest.Env(t)
	cfg, err := env.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{kubeconfig: env.Kubeconfig, warnings: &warningRecorder{}}
	c.cfg = rest.CopyConfig(cfg)
	c.cfg.WarningHandler = c.warnings
	c.kube = kubernetes.NewForConfigOrDie(c.cfg)
	c.dyn = dynamic.NewForConfigOrDie(c.cfg)
	dc, err := discovery.NewDiscoveryClientForConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return c
}

// namespace creates a fresh namespace that enforces the restricted Pod
// Security level, and deletes it when the test ends.
func (c *testCluster) namespace(t *testing.T, prefix string) string {
	t.Helper()
	name := prefix + "-" + rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if _, err := c.kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func (c *testCluster) resource(t *testing.T, obj *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s %s: %v", gvk.Kind, obj.GetName(), err)
	}
	if m.Scope.Name() == apimeta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	return c.dyn.Resource(m.Resource)
}

// ensureMonitoringCRDs installs the minimal copies of the Prometheus
// Operator's ServiceMonitor and PrometheusRule CRDs when the cluster has
// none, and removes them afterwards.
func (c *testCluster) ensureMonitoringCRDs(t *testing.T) {
	t.Helper()
	c.ensureCRD(t, "testdata/servicemonitor-crd.yaml", "ServiceMonitor")
	c.ensureCRD(t, "testdata/prometheusrule-crd.yaml", "PrometheusRule")
}

// ensureCRD installs the CRD in file (of monitoring.coreos.com/v1 kind)
// when the cluster has none, and removes it afterwards.
func (c *testCluster) ensureCRD(t *testing.T, file, kind string) {
	t.Helper()
	ctx := context.Background()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	crd := decode(t, string(data))[0]
	crds := c.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{}); err == nil {
		return // a real Prometheus Operator's, or another run's
	}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{}) })
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		c.mapper.Reset()
		_, err := c.mapper.RESTMapping(schema.GroupKind{Group: "monitoring.coreos.com", Kind: kind}, "v1")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the %s CRD was not served: %v", kind, err)
	}
}

// Every rendered object, with default values and with every optional part on,
// passes the apiserver's validation: a server-side apply, dry run, with strict
// field validation (a misspelled field fails), in a namespace that enforces
// restricted Pod Security (which warns about a Deployment that would break it).
// The RBAC objects included: the apiserver serves every kind and resource
// they name.
func TestChartPassesServerDryRun(t *testing.T) {
	c := cluster(t)
	c.ensureMonitoringCRDs(t)
	for _, tc := range []struct {
		name string
		args []string
	}{{"defaults", nil}, {"everything on", []string{"--values", everythingOn}}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.namespace(t, "qc-dryrun")
			// The state namespace must exist: the test's own.
			objs := render(t, ns, append(tc.args, "--set", "stateNamespace="+ns)...)
			for _, obj := range objs {
				data, err := json.Marshal(obj.Object)
				if err != nil {
					t.Fatal(err)
				}
				force := true
				_, err = c.resource(t, obj).Patch(context.Background(), obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
					FieldManager: "quota-console-chart-test", Force: &force, FieldValidation: "Strict", DryRun: []string{metav1.DryRunAll},
				})
				if err != nil {
					t.Errorf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
				if w := c.warnings.take(); len(w) > 0 {
					t.Errorf("%s %s: apiserver warnings: %q", obj.GetKind(), obj.GetName(), w)
				}
			}
			if len(objs) < 4 {
				t.Errorf("only %d objects rendered", len(objs))
			}
		})
	}
}

// helm install, upgrade and uninstall against the sandbox. KWOK nodes run
// the pods (no container starts), which is enough to see the restricted
// namespace admit them and the Deployment carry each change. The sandbox
// has the shared roles already (deploy/rbac, which other tests apply), so
// the release is a second one: rbac.sharedRoles=false.
func TestChartInstallUpgradeUninstall(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	ns := c.namespace(t, "qc-helm")
	common := []string{"--kubeconfig", c.kubeconfig, "--namespace", ns, "--timeout", "2m"}
	if out, err := runHelm(t, append([]string{"install", "qc", chartDir, "--set", "rbac.sharedRoles=false"}, common...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = runHelm(t, append([]string{"uninstall", "qc", "--ignore-not-found"}, common...)...) })

	name := "qc-quota-console"
	d, err := c.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 || !contains(d.Spec.Template.Spec.Containers[0].Args, "--log-level=info") {
		t.Errorf("installed Deployment: replicas %d, args %q", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
	}
	for _, get := range []func() error{
		func() error { _, err := c.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); return err },
		func() error {
			_, err := c.kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := c.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		func() error { _, err := c.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{}); return err },
		func() error {
			_, err := c.kube.RbacV1().RoleBindings("kueue-system").Get(ctx, name+"-read-kueue-config", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); err != nil {
			t.Error(err)
		}
	}
	key, err := c.kube.CoreV1().Secrets(ns).Get(ctx, name+"-session-key", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSessionKey(t, key.Data["key"])
	// The restricted namespace admits the pods (a breach of the level would
	// leave the ReplicaSet failing to create them).
	waitForPods(t, c, ns, 2)

	if out, err := runHelm(t, append([]string{"upgrade", "qc", chartDir, "--reset-then-reuse-values", "--set", "logLevel=debug", "--set", "replicas=3",
		"--set", "prometheus.url=http://prometheus.monitoring.svc:9090"}, common...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d, err = c.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	if *d.Spec.Replicas != 3 || !contains(args, "--log-level=debug") || contains(args, "--log-level=info") ||
		!contains(args, "--prometheus-url=http://prometheus.monitoring.svc:9090") || !contains(args, "--session-key-file=/etc/quota-console/session-key/key") {
		t.Errorf("upgraded Deployment: replicas %d, args %q", *d.Spec.Replicas, args)
	}
	keyAfter, err := c.kube.CoreV1().Secrets(ns).Get(ctx, name+"-session-key", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(key.Data["key"], keyAfter.Data["key"]) {
		t.Error("the upgrade replaced the session key: everyone would be signed out")
	}
	waitForPods(t, c, ns, 3)

	// A wrong value fails the upgrade and leaves the release as it was.
	if _, err := runHelm(t, append([]string{"upgrade", "qc", chartDir, "--reset-then-reuse-values", "--set", "replicas=0"}, common...)...); err == nil {
		t.Error("helm upgrade accepted replicas=0")
	}

	if out, err := runHelm(t, append([]string{"uninstall", "qc", "--wait"}, common...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, obj := range []struct {
		resource  schema.GroupVersionResource
		namespace string
		name      string
	}{
		{appsv1.SchemeGroupVersion.WithResource("deployments"), ns, name},
		{corev1.SchemeGroupVersion.WithResource("services"), ns, name},
		{corev1.SchemeGroupVersion.WithResource("serviceaccounts"), ns, name},
		{schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, ns, name},
		{corev1.SchemeGroupVersion.WithResource("secrets"), ns, name + "-session-key"},
		{rbacv1.SchemeGroupVersion.WithResource("clusterroles"), "", name},
		{rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), "", name},
		{rbacv1.SchemeGroupVersion.WithResource("roles"), "kueue-system", name + "-read-kueue-config"},
		{rbacv1.SchemeGroupVersion.WithResource("rolebindings"), "default", name + "-events"},
	} {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			_, err := c.dyn.Resource(obj.resource).Namespace(obj.namespace).Get(ctx, obj.name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("%s %s still there after helm uninstall", obj.resource.Resource, obj.name)
		}
	}
	releases, err := c.kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil || len(releases.Items) != 0 {
		t.Errorf("helm's release records after uninstall: %d (%v)", len(releases.Items), err)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// waitForPods waits until the Deployment's pods number n and none was refused.
func waitForPods(t *testing.T, c *testCluster, ns string, n int) {
	t.Helper()
	ctx := context.Background()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=qc"})
		if err != nil {
			return false, err
		}
		live := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live++
			}
		}
		last = fmt.Sprintf("%d pods", live)
		return live == n, nil
	})
	if err != nil {
		events, _ := c.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		var reasons []string
		for _, e := range events.Items {
			reasons = append(reasons, e.Message)
		}
		t.Fatalf("want %d pods of the release, have %s; refused: %q", n, last, reasons)
	}
}
