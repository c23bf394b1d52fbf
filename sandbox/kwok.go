package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/manifest"
)

// Resource names of the accelerators the fake nodes advertise: the ones the
// console reads.
const (
	ResourceGPU    = domain.ResourceGPU
	ResourceNeuron = domain.ResourceNeuron
	ResourceEFA    = domain.ResourceEFA

	// PodCompleteDelay on a pod's annotations makes KWOK complete it after that
	// long ("90s"); pods without it run until deleted.
	PodCompleteDelay = "pod-complete.stage.kwok.x-k8s.io/delay"

	kwokAnnotation = "kwok.x-k8s.io/node"
)

// FakeNode is one node of the sandbox's fleet.
type FakeNode struct {
	Name     string
	Shape    domain.InstanceShape
	NotReady bool
	// PartitionedGPUs of the node's GPUs are split into MIG partitions
	// (Shape.Partitions, the NVIDIA device plugin's mixed strategy); the
	// others are offered whole.
	PartitionedGPUs int64
}

// WholeGPUs are the GPUs the node offers as nvidia.com/gpu.
func (n FakeNode) WholeGPUs() int64 { return n.Shape.GPUs - n.PartitionedGPUs }

// Fleet is the sandbox's fake GPU cluster: a few instances of the common
// HyperPod types, one of them NotReady so that "pending recovery" shows.
func Fleet() []FakeNode {
	var nodes []FakeNode
	add := func(instanceType string, count int, notReady int) {
		shape, ok := domain.LookupShape(instanceType)
		if !ok {
			panic("fleet names an instance type missing from the catalog: " + instanceType)
		}
		for i := 1; i <= count; i++ {
			nodes = append(nodes, FakeNode{
				Name:     fmt.Sprintf("hyperpod-%s-%d", strings.NewReplacer("ml.", "", ".", "-").Replace(instanceType), i),
				Shape:    shape,
				NotReady: i > count-notReady,
			})
		}
	}
	add("ml.p5.48xlarge", 5, 1)
	add("ml.g5.2xlarge", 2, 0)
	add("ml.g6.12xlarge", 2, 0)
	add("ml.trn1.32xlarge", 2, 0)
	add("ml.c5.2xlarge", 2, 0)
	// A100 80 GB nodes in MIG mixed strategy: 4 GPUs whole, 2 as seven
	// 1g.10gb partitions each, 2 as two 3g.40gb partitions each.
	add("ml.p4de.24xlarge", 2, 0)
	for i := range nodes {
		if nodes[i].Shape.Type == "ml.p4de.24xlarge" {
			nodes[i].PartitionedGPUs = 4
			nodes[i].Shape.Partitions = map[string]int64{"mig-1g.10gb": 14, "mig-3g.40gb": 4}
		}
	}
	return nodes
}

func (n FakeNode) object() *corev1.Node {
	s := n.Shape
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(s.VCPU, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", s.MemoryGiB)),
		corev1.ResourcePods:   resource.MustParse("110"),
		ResourceGPU:           *resource.NewQuantity(n.WholeGPUs(), resource.DecimalSI),
		ResourceNeuron:        *resource.NewQuantity(s.Neuron, resource.DecimalSI),
		ResourceEFA:           *resource.NewQuantity(s.EFA, resource.DecimalSI),
	}
	labels := map[string]string{
		"kubernetes.io/hostname":                     n.Name,
		"kubernetes.io/os":                           "linux",
		"kubernetes.io/arch":                         "amd64",
		"node.kubernetes.io/instance-type":           s.Type,
		"type":                                       "kwok",
		"sagemaker.amazonaws.com/node-health-status": "Schedulable",
	}
	for profile, count := range s.Partitions {
		capacity[domain.PartitionResource(profile)] = *resource.NewQuantity(count, resource.DecimalSI)
		labels["nvidia.com/mig.strategy"] = "mixed"
	}
	if s.GPUs > 0 {
		labels["nvidia.com/gpu.product"] = s.GPUModel
		labels["nvidia.com/gpu.count"] = fmt.Sprint(s.GPUs)
		labels["nvidia.com/gpu.memory"] = fmt.Sprint(s.GPUMemGiB * 1024)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels, Annotations: map[string]string{}},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(),
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.2-kwok", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
	if n.NotReady {
		// Not managed by KWOK: nothing heartbeats it, so it stays NotReady, as a
		// node waiting for repair does.
		labels["sagemaker.amazonaws.com/node-health-status"] = "UnschedulablePendingReboot"
		node.Spec.Unschedulable = true
		node.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			Message:            "GPU health check failed: pending reboot",
			LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now(),
		}}
	} else {
		node.Annotations[kwokAnnotation] = "fake"
	}
	return node
}

// kwokStages writes KWOK's node and pod lifecycle stages. Pods complete only
// when they carry PodCompleteDelay, so a job chooses its own run time.
func (in *instance) kwokStages() (string, error) {
	dir := filepath.Join(in.bin, "kwok-stage")
	files := []string{
		"node/fast/node-initialize.yaml",
		"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/general/pod-create.yaml",
		"pod/general/pod-init-container-running.yaml",
		"pod/general/pod-init-container-completed.yaml",
		"pod/general/pod-ready.yaml",
		"pod/general/pod-complete.yaml",
		"pod/general/pod-delete.yaml",
	}
	var docs []string
	for _, f := range files {
		objs, err := manifest.ReadFiles(os.ReadFile, filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		for _, o := range objs {
			if o.GetName() == "pod-complete" {
				exprs, _, _ := unstructured.NestedSlice(o.Object, "spec", "selector", "matchExpressions")
				exprs = append(exprs, map[string]any{
					"key": `.metadata.annotations["` + PodCompleteDelay + `"]`, "operator": "Exists",
				})
				if err := unstructured.SetNestedSlice(o.Object, exprs, "spec", "selector", "matchExpressions"); err != nil {
					return "", err
				}
			}
			if strings.HasPrefix(o.GetName(), "pod-") && o.GetName() != "pod-complete" {
				// Pods start within a second, as on a warm node with a cached image.
				if err := unstructured.SetNestedField(o.Object, int64(200), "spec", "delay", "durationMilliseconds"); err != nil {
					return "", err
				}
			}
			// Run times are the job's choice, and pods start at once: no random jitter.
			unstructured.RemoveNestedField(o.Object, "spec", "delay", "jitterDurationMilliseconds")
			unstructured.RemoveNestedField(o.Object, "spec", "delay", "jitterDurationFrom")
			data, err := yaml.Marshal(o.Object)
			if err != nil {
				return "", err
			}
			docs = append(docs, string(data))
		}
	}
	path := in.path("kwok.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o644)
}

func (in *instance) startKWOK(ctx context.Context, _ pki) error {
	stages, err := in.kwokStages()
	if err != nil {
		return err
	}
	if err := in.launch("kwok", in.binary("kwok"), []string{
		"--config", stages,
		"--kubeconfig", in.path("kubeconfig"),
		"--manage-nodes-with-annotation-selector", kwokAnnotation + "=fake",
		"--server-address", in.addr(portKWOK),
		"--node-lease-duration-seconds", "15",
		"--cidr", "10.244.0.0/16",
		"--node-ip", "127.0.0.1",
	}); err != nil {
		return err
	}
	c, err := in.clients()
	if err != nil {
		return err
	}
	fleet := Fleet()
	for _, n := range fleet {
		_, err := c.kube.CoreV1().Nodes().Create(ctx, n.object(), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return in.waitFor(ctx, "kwok", 60*time.Second, func(ctx context.Context) error {
		for _, n := range fleet {
			if n.NotReady {
				continue
			}
			node, err := c.kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !nodeReady(node) {
				return fmt.Errorf("node %s not Ready yet", n.Name)
			}
		}
		return nil
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
