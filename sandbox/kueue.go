package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/manifest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

const (
	kueueNamespace     = "kueue-system"
	webhookService     = "kueue-webhook-service"
	webhookSecret      = "kueue-webhook-server-cert"
	visibilityService  = "kueue-visibility-server"
	kueueConfigMap     = "kueue-manager-config"
	kueueConfigMapKey  = "controller_manager_config.yaml"
	sandboxFieldManger = "quota-console-sandbox"
)

// clients of one running apiserver.
type clients struct {
	rest    *rest.Config
	kube    kubernetes.Interface
	kueue   kueueclient.Interface
	dynamic dynamic.Interface
	*manifest.Applier
}

// RESTConfig loads the admin config of a running instance.
func (e *Env) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

func (in *instance) clients() (*clients, error) {
	cfg, err := in.env().RESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := kueue.NewClients(cfg)
	if err != nil {
		return nil, err
	}
	applier, err := manifest.NewApplier(cfg, sandboxFieldManger)
	if err != nil {
		return nil, err
	}
	return &clients{rest: cfg, kube: c.Kube, kueue: c.Kueue, dynamic: applier.Dynamic(), Applier: applier}, nil
}

func (in *instance) kueueConfig() string {
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: %s
metrics:
  bindAddress: %s
  enableClusterQueueResources: true
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
# Kueue exits when its caches take longer than this to fill (2 minutes unless
# set): the load instance's 50 000 Workloads, listed while a console lists
# them too, took longer.
controller:
  cacheSyncTimeout: 600000000000 # 10 minutes: Kueue reads it as nanoseconds
internalCertManagement:
  enable: true
  webhookServiceName: %s
  webhookSecretName: %s
integrations:
  frameworks:
  - batch/job
  - pod
  - deployment
  - statefulset
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
# Kueue evicts an admitted Workload whose pods are not ready within this
# time (30 minutes unless set). The load instance's Workloads are bare, with
# no pods to become ready: every admitted one would be evicted and requeued.
waitForPodsReady:
  timeout: 87600h
# Queues whose admissionScope asks for it order their LocalQueues by recent
# use. Kueue writes each LocalQueue's use into its status every sampling
# interval: often enough here to see it within a test, rarely for the load
# instance's 200 queues.
admissionFairSharing:
  usageHalfLifeTime: 1h
  usageSamplingInterval: %s
# How Kueue counts HAMi's vGPUs, as its "Using HAMi" page configures it: a
# pod's per-vGPU cores and memory times its vGPUs. Only pods asking for
# nvidia.com/gpucores or nvidia.com/gpumem are counted differently.
resources:
  transformations:
  - input: nvidia.com/gpucores
    strategy: Replace
    multiplyBy: nvidia.com/gpu
    outputs:
      nvidia.com/total-gpucores: "1"
  - input: nvidia.com/gpumem
    strategy: Replace
    multiplyBy: nvidia.com/gpu
    outputs:
      nvidia.com/total-gpumem: "1"
# ConcurrentAdmission (alpha) only changes the queues that ask for it
# (spec.concurrentAdmissionPolicy), as Kueue's own example does.
featureGates:
  LocalQueueMetrics: true
  VisibilityOnDemand: true
  ConcurrentAdmission: true
visibilityServer:
  bindAddress: 127.0.0.1
  bindPort: %d
`, kueueNamespace, in.addr(portKueueHealth), in.addr(portKueueMetrics), in.port(portKueueWebhook),
		in.path("kueue-certs"), webhookService, webhookSecret, in.usageSampling(), in.port(portKueueVisibility))
}

// usageSampling is how often Kueue samples the LocalQueues' recent use.
func (in *instance) usageSampling() string {
	if in.opts.Name == Load.Name {
		return "5m"
	}
	return "10s"
}

// kueueManifests returns Kueue's CRDs and webhook configurations rewired to a
// webhook served on loopback: an ExternalName Service named like the in-cluster
// one points the apiserver at localhost, and the certificate Kueue issues for
// that Service name then verifies.
func (in *instance) kueueManifests() ([]*unstructured.Unstructured, error) {
	cfgDir := filepath.Join(in.bin, "kueue-config")
	crdFiles, err := filepath.Glob(filepath.Join(cfgDir, "crd", "bases", "*.yaml"))
	if err != nil {
		return nil, err
	}
	crds, err := manifest.ReadFiles(os.ReadFile, crdFiles...)
	if err != nil {
		return nil, err
	}
	port := int64(in.port(portKueueWebhook))
	service := map[string]any{"namespace": kueueNamespace, "name": webhookService, "port": port}
	// The CRDs Kueue's own kustomization gives a conversion webhook (not
	// ResourceFlavors: Kueue injects no CA there, and each conversion would fail).
	converted := map[string]bool{"localqueues": true, "clusterqueues": true, "workloads": true, "cohorts": true, "multikueueclusters": true}
	for _, crd := range crds {
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		if !converted[plural] {
			continue
		}
		svc := map[string]any{"namespace": kueueNamespace, "name": webhookService, "port": port, "path": "/convert"}
		conversion := map[string]any{
			"strategy": "Webhook",
			"webhook": map[string]any{
				"clientConfig":             map[string]any{"service": svc},
				"conversionReviewVersions": []any{"v1"},
			},
		}
		if err := unstructured.SetNestedMap(crd.Object, conversion, "spec", "conversion"); err != nil {
			return nil, err
		}
	}

	hooks, err := manifest.ReadFiles(os.ReadFile, filepath.Join(cfgDir, "webhook", "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	notSystem := map[string]any{"matchExpressions": []any{map[string]any{
		"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"kube-system", kueueNamespace},
	}}}
	for _, h := range hooks {
		h.SetName("kueue-" + h.GetName())
		list, _, _ := unstructured.NestedSlice(h.Object, "webhooks")
		var kept []any
		for _, item := range list {
			w := item.(map[string]any)
			if !servedWebhook(w) {
				continue
			}
			// The manifest's path stays; only where the service is reached changes.
			for k, v := range service {
				if err := unstructured.SetNestedField(w, v, "clientConfig", "service", k); err != nil {
					return nil, err
				}
			}
			if !groupsOf(w)["kueue.x-k8s.io"] {
				w["namespaceSelector"] = notSystem
			}
			kept = append(kept, w)
		}
		if err := unstructured.SetNestedSlice(h.Object, kept, "webhooks"); err != nil {
			return nil, err
		}
	}
	return append(crds, hooks...), nil
}

// servedWebhook keeps Kueue's own kinds and the integrations the sandbox
// enables: batch Jobs, plain Pods (and pod groups), Deployments and
// StatefulSets, as in Kueue's examples. Other integrations' kinds are not
// served here.
func servedWebhook(w map[string]any) bool {
	g := groupsOf(w)
	return g["kueue.x-k8s.io"] || g["batch"] || g[""] || g["apps"]
}

func groupsOf(w map[string]any) map[string]bool {
	out := map[string]bool{}
	rules, _, _ := unstructured.NestedSlice(w, "rules")
	for _, r := range rules {
		groups, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "apiGroups")
		for _, g := range groups {
			out[g] = true
		}
	}
	return out
}

func (in *instance) startKueue(ctx context.Context, _ pki) error {
	c, err := in.clients()
	if err != nil {
		return err
	}
	manifests, err := in.kueueManifests()
	if err != nil {
		return err
	}
	config := in.kueueConfig()
	bootstrap := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": kueueNamespace}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": webhookService, "namespace": kueueNamespace},
			"spec": map[string]any{"type": "ExternalName", "externalName": "localhost",
				"ports": []any{map[string]any{"name": "https", "port": int64(in.port(portKueueWebhook)), "protocol": "TCP"}}}}},
		// Kueue's visibility API (pending workloads and their positions), served on
		// loopback and reached through the aggregator like the webhooks.
		{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": visibilityService, "namespace": kueueNamespace},
			"spec": map[string]any{"type": "ExternalName", "externalName": "localhost",
				"ports": []any{map[string]any{"name": "https", "port": int64(in.port(portKueueVisibility)), "protocol": "TCP"}}}}},
		// Installs keep Kueue's configuration in this ConfigMap; the console reads it from there.
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": kueueConfigMap, "namespace": kueueNamespace},
			"data": map[string]any{kueueConfigMapKey: config}}},
	}
	if err := c.Apply(ctx, bootstrap...); err != nil {
		return err
	}
	// Kueue blocks forever if its certificate Secret does not exist when it starts.
	_, err = c.kube.CoreV1().Secrets(kueueNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: webhookSecret, Namespace: kueueNamespace},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := c.Apply(ctx, manifests...); err != nil {
		return err
	}
	if err := c.Apply(ctx, in.visibilityAPIServices()...); err != nil {
		return err
	}
	if err := os.WriteFile(in.path("kueue-config.yaml"), []byte(config), 0o644); err != nil {
		return err
	}
	// A restart finds the certificates of the last run in the Secret.
	if _, err := in.syncWebhookCerts(ctx, c); err != nil {
		return err
	}
	if err := in.launch("kueue", in.binary("kueue"), []string{
		"--config", in.path("kueue-config.yaml"), "--kubeconfig", in.path("kubeconfig"), "--zap-log-level", "info",
	}); err != nil {
		return err
	}
	// What the kubelet does in a cluster: mount the Secret Kueue fills into its cert folder.
	err = in.waitFor(ctx, "kueue", 90*time.Second, func(ctx context.Context) error {
		changed, err := in.syncWebhookCerts(ctx, c)
		if err != nil {
			return err
		}
		if changed {
			return errors.New("certificates just written")
		}
		return in.get(ctx, "http://"+in.addr(portKueueHealth)+"/readyz")
	})
	if err != nil {
		return err
	}
	// Ready means the webhooks answer: a dry-run create goes through the
	// validating webhook and the CRD conversion.
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
		"metadata": map[string]any{"name": "sandbox-webhook-probe"},
	}}
	gvr := c.dynamic.Resource(kueueGVR("resourceflavors"))
	return in.waitFor(ctx, "kueue", 60*time.Second, func(ctx context.Context) error {
		_, err := gvr.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		_, err = c.dynamic.Resource(kueueGVR("clusterqueues")).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
}

// syncWebhookCerts copies the webhook Secret's certificate into Kueue's cert
// folder and reports whether the files changed.
func (in *instance) syncWebhookCerts(ctx context.Context, c *clients) (bool, error) {
	secret, err := c.kube.CoreV1().Secrets(kueueNamespace).Get(ctx, webhookSecret, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	changed := false
	for _, key := range []string{"tls.crt", "tls.key", "ca.crt"} {
		data := secret.Data[key]
		if len(data) == 0 {
			continue
		}
		path := in.path("kueue-certs", key)
		old, _ := os.ReadFile(path)
		if bytes.Equal(old, data) {
			continue
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return false, err
		}
		changed = true
	}
	return changed, nil
}

func kueueGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: resource}
}

// visibilityAPIServices register Kueue's visibility API with the aggregator.
func (in *instance) visibilityAPIServices() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, v := range []string{"v1beta1", "v1beta2"} {
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": v + ".visibility.kueue.x-k8s.io"},
			"spec": map[string]any{
				"group": "visibility.kueue.x-k8s.io", "version": v,
				"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
				// Kueue serves it with a self-signed certificate, as in a cluster.
				"insecureSkipTLSVerify": true,
				"service":               map[string]any{"name": visibilityService, "namespace": kueueNamespace, "port": int64(in.port(portKueueVisibility))},
			},
		}})
	}
	return out
}
