package kueue_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// clock is a settable clock for the Applier, so tests tell apply runs apart
// by their audit timestamps without waiting.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func as(user string) context.Context { return kueue.WithActor(context.Background(), user) }

// applyAs builds and applies a team as user and registers its cleanup.
func applyAs(t *testing.T, a kueue.Applier, s domain.Settings, user string, team domain.Team) {
	t.Helper()
	objs, err := domain.BuildTeam(s, team, domain.LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CheckTeam(as(user), objs); err != nil {
		t.Fatalf("check team %s: %v", team.Name, err)
	}
	if err := a.ApplyTeam(as(user), objs); err != nil {
		t.Fatalf("apply team %s as %s: %v", team.Name, user, err)
	}
	cleanupTeam(t, a, s, team.Name)
}

func cleanupTeam(t *testing.T, a kueue.Applier, s domain.Settings, team string) {
	t.Cleanup(func() { _ = a.DeleteTeam(context.Background(), s, team) })
}

type audit struct{ createdBy, createdAt, changedBy, changedAt string }

func auditOf(m metav1.Object) audit {
	a := m.GetAnnotations()
	return audit{a[kueue.CreatedByAnnotation], a[kueue.CreatedAtAnnotation], a[kueue.ChangedByAnnotation], a[kueue.ChangedAtAnnotation]}
}

// teamObjectsRead are a team's objects as read straight from the apiserver.
type teamObjectsRead struct {
	ns, cq, lq, rb metav1.Object
	rvs            map[string]string
}

func readTeam(t *testing.T, c testClients, s domain.Settings, team string) teamObjectsRead {
	t.Helper()
	ctx := context.Background()
	ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, s.Namespace(team), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue(team), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lq, err := c.Kueue.KueueV1beta2().LocalQueues(s.Namespace(team)).Get(ctx, s.LocalQueue(team), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := c.Kube.RbacV1().RoleBindings(s.Namespace(team)).Get(ctx, domain.TeamMemberRole, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := teamObjectsRead{ns: ns, cq: cq, lq: lq, rb: rb, rvs: map[string]string{}}
	for name, o := range map[string]metav1.Object{"Namespace": ns, "RoleBinding": rb} {
		l.rvs[name] = o.GetResourceVersion()
	}
	// The queues' status moves with Kueue's bookkeeping (a new LocalQueue's
	// first status may come after it is read): their spec and metadata are
	// what the console writes.
	for name, o := range map[string]metav1.Object{"ClusterQueue": cq, "LocalQueue": lq} {
		l.rvs[name+" generation"] = fmt.Sprint(o.GetGeneration())
		l.rvs[name+" annotations"] = fmt.Sprint(o.GetAnnotations())
		l.rvs[name+" labels"] = fmt.Sprint(o.GetLabels())
	}
	return l
}

func events(t *testing.T, c testClients, involved string) []corev1.Event {
	t.Helper()
	list, err := c.Kube.CoreV1().Events(domain.EventNamespace).List(context.Background(),
		metav1.ListOptions{FieldSelector: "involvedObject.name=" + involved})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func TestAuditAnnotationsAndTeamRevisions(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	clk := newClock()
	a := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue, Now: clk.Now}
	v1 := domain.Team{Name: "audited", Enabled: true, FairShareWeight: 10, Preemption: domain.PreemptLowerPriority,
		Lending: domain.LendAndBorrow, BorrowLimitPercent: 50, Members: []domain.Member{{Kind: "User", Name: "dev"}},
		Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](4)}}}
	t1 := clk.Now()
	applyAs(t, a, s, "alice", v1)

	// Created: every object of the team names alice as creator and last changer.
	created := readTeam(t, c, s, "audited")
	want := audit{"alice", stamp(t1), "alice", stamp(t1)}
	for name, o := range map[string]metav1.Object{"Namespace": created.ns, "ClusterQueue": created.cq, "LocalQueue": created.lq, "RoleBinding": created.rb} {
		if got := auditOf(o); got != want {
			t.Errorf("%s audit %+v, want %+v", name, got, want)
		}
	}
	// Shared objects (the flavor) carry an audit too, from whichever test or
	// console wrote them first.
	rf, err := c.Kueue.KueueV1beta2().ResourceFlavors().Get(context.Background(), "ml.p5.48xlarge", metav1.GetOptions{})
	if err != nil || auditOf(rf).createdAt == "" || auditOf(rf).changedBy == "" {
		t.Errorf("flavor audit %+v %v", auditOf(rf), err)
	}

	// The same allocation again, later, by bob: nothing is written at all.
	clk.advance(time.Hour)
	applyAs(t, a, s, "bob", v1)
	again := readTeam(t, c, s, "audited")
	if diff := cmp.Diff(created.rvs, again.rvs); diff != "" {
		t.Errorf("re-applying the same team wrote objects (-before +after):\n%s", diff)
	}
	if got := auditOf(again.cq); got != want {
		t.Errorf("an unchanged re-apply changed the audit: %+v", got)
	}

	// A real change by bob: the ClusterQueue names bob as last changer and
	// keeps alice as creator; the LocalQueue did not change and still says alice.
	clk.advance(time.Hour)
	t3 := clk.Now()
	v2 := v1
	v2.Quota = []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](6)}}
	applyAs(t, a, s, "bob", v2)
	changed := readTeam(t, c, s, "audited")
	if got, want := auditOf(changed.cq), (audit{"alice", stamp(t1), "bob", stamp(t3)}); got != want {
		t.Errorf("ClusterQueue audit after bob's change %+v, want %+v", got, want)
	}
	if got := auditOf(changed.lq); got != want {
		t.Errorf("unchanged LocalQueue audit %+v, want %+v", got, want)
	}

	// Rollback to revision 1 by carol, through the normal apply path.
	clk.advance(time.Hour)
	hist, err := a.TeamRevisions(context.Background(), s, "audited")
	if err != nil {
		t.Fatal(err)
	}
	first, ok := domain.FindRevision(hist, 1)
	if !ok {
		t.Fatalf("no revision 1 in %+v", hist)
	}
	objs, err := domain.BuildTeam(s, first.Allocation, domain.LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ApplyTeam(kueue.WithRollback(as("carol"), 1), objs); err != nil {
		t.Fatal(err)
	}
	// A retried rollback (say the response was lost) records nothing more.
	if err := a.ApplyTeam(kueue.WithRollback(as("carol"), 1), objs); err != nil {
		t.Fatal(err)
	}

	// The history outlives this Applier: a new console reads it from the cluster.
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	restarted := kueue.Applier{Kube: kubernetes.NewForConfigOrDie(rest.CopyConfig(cfg)), Kueue: kueueclient.NewForConfigOrDie(cfg)}
	hist, err = restarted.TeamRevisions(context.Background(), s, "audited")
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		Rev      int
		By       string
		Action   domain.Action
		To       int
		Changes  string
		Revision string
	}
	var got []line
	for i, r := range hist {
		changes := ""
		if i+1 < len(hist) {
			changes = strings.Join(domain.DiffTeams(hist[i+1].Allocation, r.Allocation), "; ")
		}
		got = append(got, line{r.Revision, r.By, r.Action, r.RolledBackTo, changes, stamp(r.At)})
	}
	wantLines := []line{
		{3, "carol", domain.ActionRollback, 1, "quota ml.p5.48xlarge GPUs 6 → 4", stamp(t3.Add(time.Hour))},
		{2, "bob", domain.ActionUpdate, 0, "quota ml.p5.48xlarge GPUs 4 → 6", stamp(t3)},
		{1, "alice", domain.ActionCreate, 0, "", stamp(t1)},
	}
	if diff := cmp.Diff(wantLines, got); diff != "" {
		t.Errorf("history, newest first (-want +got):\n%s", diff)
	}
	if gpu := gpuQuotaOf(t, c, s, "audited"); gpu.NominalQuota.Value() != 4 {
		t.Errorf("after the rollback the ClusterQueue has %s GPUs, want 4", &gpu.NominalQuota)
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(s.State()).Get(context.Background(), domain.TeamRevisionsName(s, "audited"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Name != s.ClusterQueue("audited")+"-history" || cm.Labels[domain.ManagedByLabel] != domain.ManagedByValue || len(cm.Data) != 3 {
		t.Errorf("history ConfigMap %s, labels %v, %d entries", cm.Name, cm.Labels, len(cm.Data))
	}

	// One Event per revision on the ClusterQueue, naming the user.
	var reasons []string
	for _, ev := range events(t, c, s.ClusterQueue("audited")) {
		reasons = append(reasons, ev.Reason+": "+ev.Message)
	}
	wantEvents := []string{
		"TeamCreated: alice created team audited (revision 1): Enabled; fair-share weight 10; preemption lower priority; lending lend and borrow; borrow limit 50 %; quota ml.p5.48xlarge: 4 GPUs; members: user dev",
		"TeamUpdated: bob updated team audited (revision 2): quota ml.p5.48xlarge GPUs 4 → 6",
		"TeamRolledBack: carol rolled team audited back to revision 1 (now revision 3): quota ml.p5.48xlarge GPUs 6 → 4",
	}
	if diff := cmp.Diff(wantEvents, reasons); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// gpuQuotaOf is the GPU quota of the team's first flavor in Kueue, with its limits.
func gpuQuotaOf(t *testing.T, c testClients, s domain.Settings, team string) kueuev1beta2.ResourceQuota {
	t.Helper()
	cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(context.Background(), s.ClusterQueue(team), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cq.Spec.ResourceGroups[0].Flavors[0].Resources[0]
}

func TestTeamHistoryKeepsTheLast50(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	a := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}
	team := domain.Team{Name: "busy", Enabled: true, Lending: domain.DontLend, Preemption: domain.PreemptNever,
		Quota: []domain.QuotaInput{{InstanceType: "ml.c5.2xlarge", VCPU: ptr.To[int64](1)}}}
	cleanupTeam(t, a, s, team.Name)
	const saves = 55
	for i := 1; i <= saves; i++ {
		team.FairShareWeight = int64(i)
		objs, err := domain.BuildTeam(s, team, domain.LookupShape)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.ApplyTeam(as("alice"), objs); err != nil {
			t.Fatal(err)
		}
	}
	hist, err := a.TeamRevisions(context.Background(), s, "busy")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != domain.RevisionLimit || hist[0].Revision != saves || hist[len(hist)-1].Revision != saves-domain.RevisionLimit+1 {
		t.Fatalf("%d revisions kept, newest %d, oldest %d; want %d, %d, %d",
			len(hist), hist[0].Revision, hist[len(hist)-1].Revision, domain.RevisionLimit, saves, saves-domain.RevisionLimit+1)
	}
	if hist[0].Allocation.FairShareWeight != saves {
		t.Errorf("newest revision has weight %d", hist[0].Allocation.FairShareWeight)
	}
	t.Logf("%d saves: %d revisions kept (%d to %d)", saves, len(hist), hist[len(hist)-1].Revision, hist[0].Revision)
}

func TestPolicyAuditAndRevisions(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	clk := newClock()
	a := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue, Now: clk.Now}
	id := rand.String(4)
	high, low := "high-"+id, "low-"+id
	ctx := context.Background()
	t.Cleanup(func() {
		for _, n := range []string{high, low} {
			_ = c.Kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(ctx, n, metav1.DeleteOptions{})
		}
		_ = c.Kueue.KueueV1beta2().Cohorts().Delete(ctx, s.Cohort, metav1.DeleteOptions{})
		_ = c.Kube.CoreV1().ConfigMaps(s.State()).Delete(ctx, domain.PolicyRevisionsName(s), metav1.DeleteOptions{})
	})
	p1 := domain.Policy{Prioritization: domain.TaskRanking, IdleAllocation: domain.IdleFairShare,
		Classes: []domain.PriorityClass{{Name: high, Weight: 80}, {Name: low, Weight: 20}}}
	if err := a.ApplyPolicy(as("alice"), s, p1); err != nil {
		t.Fatal(err)
	}
	t1 := clk.Now()
	clk.advance(time.Minute)
	if err := a.ApplyPolicy(as("bob"), s, p1); err != nil { // unchanged: nothing recorded
		t.Fatal(err)
	}
	p2 := p1
	p2.Classes = []domain.PriorityClass{{Name: high, Weight: 90}}
	clk.advance(time.Minute)
	if err := a.ApplyPolicy(as("bob"), s, p2); err != nil {
		t.Fatal(err)
	}
	t2 := clk.Now()

	cohort, err := c.Kueue.KueueV1beta2().Cohorts().Get(ctx, s.Cohort, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := auditOf(cohort), (audit{"alice", stamp(t1), "bob", stamp(t2)}); got != want {
		t.Errorf("cohort audit %+v, want %+v", got, want)
	}
	wpc, err := c.Kueue.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, high, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := auditOf(wpc), (audit{"alice", stamp(t1), "bob", stamp(t2)}); got != want {
		t.Errorf("priority class audit %+v, want %+v", got, want)
	}
	if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, s.State(), metav1.GetOptions{}); err != nil {
		t.Errorf("state namespace %s: %v", s.State(), err)
	}

	hist, err := a.PolicyRevisions(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].By != "bob" || hist[1].Action != domain.ActionCreate || hist[1].By != "alice" {
		t.Fatalf("policy history: %+v", hist)
	}
	wantDiff := []string{fmt.Sprintf("priority class %s weight 80 → 90", high), fmt.Sprintf("priority class %s removed (was weight 20)", low)}
	if diff := cmp.Diff(wantDiff, domain.DiffPolicies(hist[1].Allocation, hist[0].Allocation)); diff != "" {
		t.Errorf("policy diff (-want +got):\n%s", diff)
	}

	// Rollback restores the removed class and records revision 3.
	if err := a.ApplyPolicy(kueue.WithRollback(as("carol"), 1), s, hist[1].Allocation); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kueue.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, low, metav1.GetOptions{}); err != nil {
		t.Errorf("rollback did not restore %s: %v", low, err)
	}
	hist, err = a.PolicyRevisions(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 || hist[0].Action != domain.ActionRollback || hist[0].RolledBackTo != 1 {
		t.Errorf("after rollback: %+v", hist[0])
	}
	var reasons []string
	for _, ev := range events(t, c, s.Cohort) {
		reasons = append(reasons, ev.Reason)
	}
	if diff := cmp.Diff([]string{"PolicyUpdated", "PolicyUpdated", "PolicyRolledBack"}, reasons); diff != "" {
		t.Errorf("policy events (-want +got):\n%s", diff)
	}
}
