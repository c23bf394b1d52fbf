package kueue_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
)

// What a team save will ask of the apiserver, as permissions the user must
// hold: create and patch of what does not exist yet, patch of what does,
// bind of the member role. A ResourceFlavor the console does not manage is
// used by the team but neither written nor asked about, and stays as it was.
func TestTeamWritesAreTheRequestsOfTheSave(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	ctx := context.Background()
	id := rand.String(5)
	own, shared := "ml.own-"+id, "ml.shared-"+id
	shape := domain.InstanceShape{GPUs: 8, VCPU: 192, MemoryGiB: 2048}
	shapes := func(instanceType string) (domain.InstanceShape, bool) {
		sh := shape
		sh.Type = instanceType
		return sh, instanceType == own || instanceType == shared
	}
	// The shared flavor, made by someone else: a toleration the console would never set.
	toleration := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "shared", Effect: corev1.TaintEffectNoSchedule}
	if _, err := c.Kueue.KueueV1beta2().ResourceFlavors().Create(ctx, &kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: shared},
		Spec: kueuev1beta2.ResourceFlavorSpec{NodeLabels: map[string]string{domain.InstanceTypeLabel: shared}, Tolerations: []corev1.Toleration{toleration}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, rf := range []string{own, shared} {
			_ = c.Kueue.KueueV1beta2().ResourceFlavors().Delete(context.Background(), rf, metav1.DeleteOptions{})
		}
	})
	team := domain.Team{Name: "writes", Enabled: true, Preemption: domain.PreemptNever, Lending: domain.DontLend,
		Members: []domain.Member{{Kind: "User", Name: "alice"}},
		Quota:   []domain.QuotaInput{{InstanceType: own, GPUs: ptr.To[int64](8)}, {InstanceType: shared, GPUs: ptr.To[int64](8)}}}
	objs, err := domain.BuildTeam(s, team, shapes)
	if err != nil {
		t.Fatal(err)
	}
	a := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}
	ns := s.Namespace("writes")
	kueueGroup, rbac := "kueue.x-k8s.io", "rbac.authorization.k8s.io"
	both := func(group, resource, namespace, name string) []kueue.Permission {
		return []kueue.Permission{{Verb: "create", Group: group, Resource: resource, Namespace: namespace, Name: name},
			{Verb: "patch", Group: group, Resource: resource, Namespace: namespace, Name: name}}
	}
	bind := kueue.Permission{Verb: "bind", Group: rbac, Resource: "clusterroles", Name: domain.TeamMemberRole}
	var want []kueue.Permission
	for _, p := range [][]kueue.Permission{both("", "namespaces", "", ns), both(kueueGroup, "resourceflavors", "", own),
		both(kueueGroup, "clusterqueues", "", s.ClusterQueue("writes")), both(kueueGroup, "localqueues", ns, s.LocalQueue("writes")),
		both(rbac, "rolebindings", ns, domain.TeamMemberRole), {bind}} {
		want = append(want, p...)
	}
	got, err := a.TeamWrites(ctx, objs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a new team's writes (-want +got):\n%s", diff)
	}

	if err := a.ApplyTeam(ctx, objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.DeleteTeam(context.Background(), s, "writes") })
	var patches []kueue.Permission
	for _, p := range want {
		if p.Verb != "create" {
			patches = append(patches, p)
		}
	}
	if got, err = a.TeamWrites(ctx, objs); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(patches, got); diff != "" {
		t.Errorf("an existing team's writes (-want +got):\n%s", diff)
	}

	rf, err := c.Kueue.KueueV1beta2().ResourceFlavors().Get(ctx, shared, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if domain.OwnsFlavor(rf) || !cmp.Equal(rf.Spec.Tolerations, []corev1.Toleration{toleration}) || rf.Annotations[kueue.ChangedByAnnotation] != "" {
		t.Errorf("the shared flavor was written: labels %v, tolerations %v, annotations %v", rf.Labels, rf.Spec.Tolerations, rf.Annotations)
	}
	if rf, err := c.Kueue.KueueV1beta2().ResourceFlavors().Get(ctx, own, metav1.GetOptions{}); err != nil || !domain.OwnsFlavor(rf) {
		t.Errorf("the team's own flavor: %v (%v)", rf, err)
	}
	cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue("writes"), metav1.GetOptions{})
	if err != nil || len(cq.Spec.ResourceGroups) != 1 || len(cq.Spec.ResourceGroups[0].Flavors) != 2 || cq.Spec.ResourceGroups[0].Flavors[1].Name != kueuev1beta2.ResourceFlavorReference(shared) {
		t.Errorf("the team's ClusterQueue does not use the shared flavor: %v (%v)", cq.Spec.ResourceGroups, err)
	}
}

// A policy save asks for its priority classes and cohort, and for deleting
// the classes of this policy it drops (not another console's).
func TestPolicyWritesAreTheRequestsOfTheSave(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	ctx := context.Background()
	id := rand.String(5)
	kept, dropped, other := "kept-"+id, "dropped-"+id, "other-"+id
	a := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}
	policy := domain.Policy{Prioritization: domain.TaskRanking, IdleAllocation: domain.IdleFairShare,
		Classes: []domain.PriorityClass{{Name: kept, Weight: 50}, {Name: dropped, Weight: 10}}}
	if err := a.ApplyPolicy(ctx, s, policy); err != nil {
		t.Fatal(err)
	}
	elsewhere := s
	elsewhere.Cohort += "-elsewhere"
	if err := a.ApplyPolicy(ctx, elsewhere, domain.Policy{Prioritization: domain.TaskRanking, Classes: []domain.PriorityClass{{Name: other, Weight: 1}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{kept, dropped, other} {
			_ = c.Kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
		for _, n := range []string{s.Cohort, elsewhere.Cohort} {
			_ = c.Kueue.KueueV1beta2().Cohorts().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	fresh := "fresh-" + id
	policy.Classes = []domain.PriorityClass{{Name: kept, Weight: 60}, {Name: fresh, Weight: 5}}
	got, err := a.PolicyWrites(ctx, s, policy)
	if err != nil {
		t.Fatal(err)
	}
	const kueueGroup = "kueue.x-k8s.io"
	want := []kueue.Permission{
		{Verb: "patch", Group: kueueGroup, Resource: "workloadpriorityclasses", Name: kept},
		{Verb: "create", Group: kueueGroup, Resource: "workloadpriorityclasses", Name: fresh},
		{Verb: "patch", Group: kueueGroup, Resource: "workloadpriorityclasses", Name: fresh},
		{Verb: "delete", Group: kueueGroup, Resource: "workloadpriorityclasses", Name: dropped},
		{Verb: "patch", Group: kueueGroup, Resource: "cohorts", Name: s.Cohort},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the policy's writes (-want +got):\n%s", diff)
	}
}
