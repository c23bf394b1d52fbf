package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/openquota/console/internal/domain"
)

// A pod holding MIG partitions of an A100 node in mixed strategy is
// reported per partition with dcgm-exporter's GPU_I_PROFILE and GPU_I_ID,
// beside the node's whole GPUs.
func TestDCGMReportsMIGPartitions(t *testing.T) {
	var node *corev1.Node
	for _, n := range Fleet() {
		if n.Shape.Type == "ml.p4de.24xlarge" {
			node = n.object()
			break
		}
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "notebook", UID: "u1", Annotations: map[string]string{GPUUtilAnnotation: "40"}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{domain.PartitionResource("mig-1g.10gb"): resource.MustParse("2")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	nodes, pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil), cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	if err := nodes.Add(node); err != nil {
		t.Fatal(err)
	}
	if err := pods.Add(pod); err != nil {
		t.Fatal(err)
	}
	c := &dcgmCollector{nodes: corelisters.NewNodeLister(nodes), pods: corelisters.NewPodLister(pods), now: time.Now}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var util *dto.MetricFamily
	for _, f := range families {
		if f.GetName() == "DCGM_FI_DEV_GPU_UTIL" {
			util = f
		}
	}
	if util == nil {
		t.Fatal("no DCGM_FI_DEV_GPU_UTIL")
	}
	byProfile := map[string]int{}
	var held []string
	for _, m := range util.Metric {
		l := map[string]string{}
		for _, p := range m.Label {
			l[p.GetName()] = p.GetValue()
		}
		byProfile[l["GPU_I_PROFILE"]]++
		if l["pod"] == "notebook" {
			held = append(held, l["gpu"]+"/"+l["GPU_I_PROFILE"]+"/"+l["GPU_I_ID"])
			if m.Gauge.GetValue() != 40 {
				t.Errorf("partition %v reports utilization %v, want the pod's 40", l, m.Gauge.GetValue())
			}
		}
	}
	if diff := cmp.Diff(map[string]int{"": 4, "1g.10gb": 14, "3g.40gb": 4}, byProfile); diff != "" {
		t.Errorf("series by profile (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"4/1g.10gb/0", "4/1g.10gb/1"}, held); diff != "" {
		t.Errorf("partitions the pod holds (-want +got):\n%s", diff)
	}
}
