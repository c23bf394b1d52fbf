package kueue

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

func TestRedefined(t *testing.T) {
	queue := kueuetest.MakeClusterQueue("team-a").Cohort("shared-pool").Nominal(8, nil).Obj()
	queue.Generation = 3
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "p5-0", Labels: map[string]string{"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	revisions := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "team-a-revisions"}, Data: map[string]string{"1": "{}"}}
	tests := []struct {
		name     string
		old, new any
		want     bool
	}{
		{"Kueue updates the queue's usage", queue, withQueue(queue, func(q *kueuev1beta2.ClusterQueue) {
			q.Status.AdmittedWorkloads = 4
			q.Status.Conditions = append(q.Status.Conditions, metav1.Condition{Type: "Active", Status: metav1.ConditionTrue})
		}), false},
		{"the queue's quota changes", queue, withQueue(queue, func(q *kueuev1beta2.ClusterQueue) {
			q.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("16")
			q.Generation++
		}), true},
		{"the queue gets a label", queue, withQueue(queue, func(q *kueuev1beta2.ClusterQueue) { q.Labels = map[string]string{"team": "a"} }), true},
		{"the queue gets an annotation", queue, withQueue(queue, func(q *kueuev1beta2.ClusterQueue) { q.Annotations = map[string]string{"note": "x"} }), true},
		{"the queue is being deleted", queue, withQueue(queue, func(q *kueuev1beta2.ClusterQueue) { q.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), true},
		{"a node's heartbeat", node, withNode(node, func(n *corev1.Node) {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
			n.ResourceVersion = "2"
		}), false},
		{"a node stops being ready", node, withNode(node, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }), true},
		{"a node is cordoned", node, withNode(node, func(n *corev1.Node) { n.Spec.Unschedulable = true }), true},
		{"a node's allocatable GPUs change", node, withNode(node, func(n *corev1.Node) {
			n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("7")}
		}), true},
		{"a node's instance type label changes", node, withNode(node, func(n *corev1.Node) {
			n.Labels = map[string]string{"node.kubernetes.io/instance-type": "ml.g5.12xlarge"}
		}), true},
		{"a ConfigMap, which has no generation", revisions, func() any {
			c := revisions.DeepCopy()
			c.Data["2"] = "{}"
			return c
		}(), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := redefined(tc.old, tc.new); got != tc.want {
				t.Errorf("redefined = %v, want %v", got, tc.want)
			}
		})
	}
}

func withQueue(q *kueuev1beta2.ClusterQueue, change func(*kueuev1beta2.ClusterQueue)) *kueuev1beta2.ClusterQueue {
	q = q.DeepCopy()
	change(q)
	return q
}

func withNode(n *corev1.Node, change func(*corev1.Node)) *corev1.Node {
	n = n.DeepCopy()
	change(n)
	return n
}
