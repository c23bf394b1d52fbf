package app_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	authzv1 "k8s.io/api/authorization/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/testenv"
)

// The what-if's answers against what Kueue then does. Each case is a cohort
// of its own (a console with its own prefix and cohort): teams with quotas,
// running and waiting jobs; the console's what-if (its page's JSON, through
// the App's reads and Kueue's scheduler over the cache's copy); then the
// same job submitted for real, and what Kueue does with it: whether it
// admits it, its place in the queue (the visibility API), whether the
// team borrows, and which Workloads it evicts.

// wiQuota is a team's quota of one instance type.
type wiQuota struct {
	instanceType string
	gpus, neuron int64
}

// wiTeam is a team of a case.
type wiTeam struct {
	name  string
	quota []wiQuota
	// lending "" lends, and borrows up to borrowPct ("" 100) % of its
	// quota; preemption "" lets its higher classes preempt its lower ones.
	lending    domain.Lending
	borrowPct  string
	preemption domain.Preemption
}

// wiPods are pods of one instance type, each asking for gpus GPUs or
// neuron Neuron devices, one vCPU and 1 GiB.
type wiPods struct {
	instanceType string
	pods         int32
	gpus, neuron int64
}

func p5(pods int32, gpus int64) wiPods     { return wiPods{"ml.p5.48xlarge", pods, gpus, 0} }
func g6(pods int32, gpus int64) wiPods     { return wiPods{"ml.g6.12xlarge", pods, gpus, 0} }
func trn1(pods int32, neuron int64) wiPods { return wiPods{"ml.trn1.32xlarge", pods, 0, neuron} }

// wiJob is a job of a case: its team, class ("low", "mid", "high", or ""
// for none) and pods; running says whether Kueue admits a job of the
// setup.
type wiJob struct {
	team, name, class string
	pods              []wiPods
	running           bool
}

// wiAnswer is what the what-if predicts, or what Kueue did: admitted now,
// borrowing, the place in the team's queue (from 1) while it waits, and
// the jobs it preempts.
type wiAnswer struct {
	Admitted, Borrowing bool
	Position            int
	Preempts            []string
}

// wiCase is one question.
type wiCase struct {
	name  string
	teams []wiTeam
	setup []wiJob
	ask   wiJob
	// want is what the case is about: the what-if must predict it, or the
	// case no longer tests what its name says.
	want wiAnswer
	// member: a member of the asking team asks, who sees no other team.
	member bool
}

func p5Team(name string, gpus int64) wiTeam {
	return wiTeam{name: name, quota: []wiQuota{{instanceType: "ml.p5.48xlarge", gpus: gpus}}}
}

func whatIfCases() []wiCase {
	run := func(team, name, class string, pods ...wiPods) wiJob {
		return wiJob{team: team, name: name, class: class, pods: pods, running: true}
	}
	queued := func(team, name, class string, pods ...wiPods) wiJob {
		return wiJob{team: team, name: name, class: class, pods: pods}
	}
	ask := func(team, class string, pods ...wiPods) wiJob {
		return wiJob{team: team, name: "asked", class: class, pods: pods}
	}
	admitted, borrowing := wiAnswer{Admitted: true}, wiAnswer{Admitted: true, Borrowing: true}
	at := func(position int) wiAnswer { return wiAnswer{Position: position} }
	preempting := func(jobs ...string) wiAnswer { return wiAnswer{Admitted: true, Preempts: jobs} }
	with := func(t wiTeam, change func(*wiTeam)) wiTeam { change(&t); return t }
	a8, b8 := p5Team("a", 8), p5Team("b", 8)
	twoTypes := wiTeam{name: "a", quota: []wiQuota{{"ml.p5.48xlarge", 8, 0}, {"ml.g6.12xlarge", 4, 0}}}
	never := func(t *wiTeam) { t.preemption = domain.PreemptNever }
	return []wiCase{
		{name: "fits in its quota", teams: []wiTeam{a8}, ask: ask("a", "mid", p5(1, 4)), want: admitted},
		{name: "fits beside a running job", teams: []wiTeam{a8}, setup: []wiJob{run("a", "running", "low", p5(1, 4))},
			ask: ask("a", "mid", p5(1, 4)), want: admitted},
		{name: "needs borrowing", teams: []wiTeam{p5Team("a", 4), b8}, ask: ask("a", "mid", p5(1, 8)), want: borrowing},
		{name: "borrows what another team leaves idle", teams: []wiTeam{p5Team("a", 4), b8}, setup: []wiJob{run("b", "lender", "mid", p5(1, 4))},
			ask: ask("a", "mid", p5(1, 8)), want: borrowing},
		{name: "beyond its borrowing limit", teams: []wiTeam{with(p5Team("a", 4), func(t *wiTeam) { t.borrowPct = "50" }), b8},
			ask: ask("a", "mid", p5(1, 8)), want: at(1)},
		{name: "the other team does not lend", teams: []wiTeam{p5Team("a", 4), with(b8, func(t *wiTeam) { t.lending = domain.DontLend })},
			ask: ask("a", "mid", p5(1, 8)), want: at(1)},
		{name: "a team that only lends borrows nothing", teams: []wiTeam{with(p5Team("a", 4), func(t *wiTeam) { t.lending = domain.Lend }), b8},
			ask: ask("a", "mid", p5(1, 8)), want: at(1)},
		{name: "preempts a lower class of its team", teams: []wiTeam{a8}, setup: []wiJob{run("a", "train", "low", p5(1, 8))},
			ask: ask("a", "high", p5(1, 8)), want: preempting("train")},
		{name: "preempts the lowest class first", teams: []wiTeam{a8},
			setup: []wiJob{run("a", "low-job", "low", p5(1, 4)), run("a", "mid-job", "mid", p5(1, 4))},
			ask:   ask("a", "high", p5(1, 4)), want: preempting("low-job")},
		{name: "a team that never preempts waits", teams: []wiTeam{with(a8, never)}, setup: []wiJob{run("a", "train", "low", p5(1, 8))},
			ask: ask("a", "high", p5(1, 8)), want: at(1)},
		{name: "does not preempt its own class", teams: []wiTeam{a8}, setup: []wiJob{run("a", "train", "mid", p5(1, 8))},
			ask: ask("a", "mid", p5(1, 8)), want: at(1)},
		{name: "borrows rather than preempts", teams: []wiTeam{a8, b8}, setup: []wiJob{run("a", "train", "low", p5(1, 8))},
			ask: ask("a", "high", p5(1, 8)), want: borrowing},
		{name: "reclaims quota it lent", teams: []wiTeam{a8, b8}, setup: []wiJob{run("b", "borrower", "low", p5(2, 8))},
			ask: ask("a", "low", p5(1, 8)), want: preempting("borrower")},
		{name: "reclaims quota it lent from a higher class", teams: []wiTeam{a8, b8}, setup: []wiJob{run("b", "borrower", "high", p5(2, 8))},
			ask: ask("a", "low", p5(1, 8)), want: preempting("borrower")},
		{name: "waits behind a higher class", teams: []wiTeam{with(a8, never)},
			setup: []wiJob{run("a", "running", "mid", p5(1, 8)), queued("a", "urgent", "high", p5(1, 8)), queued("a", "later", "low", p5(1, 8))},
			ask:   ask("a", "mid", p5(1, 8)), want: at(2)},
		{name: "waits behind earlier jobs of its class", teams: []wiTeam{with(a8, never)},
			setup: []wiJob{run("a", "running", "mid", p5(1, 8)), queued("a", "first", "mid", p5(1, 8)), queued("a", "second", "mid", p5(1, 4))},
			ask:   ask("a", "mid", p5(1, 8)), want: at(3)},
		{name: "goes ahead of lower classes", teams: []wiTeam{with(a8, never)},
			setup: []wiJob{run("a", "running", "high", p5(1, 8)), queued("a", "first", "low", p5(1, 8)), queued("a", "second", "", p5(1, 8))},
			ask:   ask("a", "mid", p5(1, 8)), want: at(1)},
		{name: "too big for the whole cohort", teams: []wiTeam{a8, b8}, ask: ask("a", "mid", p5(3, 8)), want: at(1)},
		{name: "the other team uses its quota", teams: []wiTeam{a8, b8}, setup: []wiJob{run("b", "own", "low", p5(1, 8))},
			ask: ask("a", "high", p5(2, 8)), want: at(1)},
		{name: "pods of two instance types", teams: []wiTeam{twoTypes}, ask: ask("a", "", p5(1, 8), g6(2, 2)), want: admitted},
		{name: "pods of two instance types, one beyond its quota", teams: []wiTeam{twoTypes},
			ask: ask("a", "", p5(1, 8), g6(2, 4)), want: at(1)},
		{name: "another instance type is full", teams: []wiTeam{twoTypes}, setup: []wiJob{run("a", "train", "mid", p5(1, 8))},
			ask: ask("a", "mid", g6(1, 4)), want: admitted},
		{name: "an instance type without quota", teams: []wiTeam{a8}, ask: ask("a", "mid", g6(1, 1)), want: at(1)},
		{name: "Neuron devices", teams: []wiTeam{{name: "a", quota: []wiQuota{{instanceType: "ml.trn1.32xlarge", neuron: 16}}}},
			ask: ask("a", "mid", trn1(1, 16)), want: admitted},
		{name: "Neuron devices borrowed", teams: []wiTeam{{name: "a", quota: []wiQuota{{instanceType: "ml.trn1.32xlarge", neuron: 16}}},
			{name: "b", quota: []wiQuota{{instanceType: "ml.trn1.32xlarge", neuron: 16}}}},
			ask: ask("a", "mid", trn1(2, 16)), want: borrowing},
		{name: "a member asks, reclaiming from a team they cannot see", member: true, teams: []wiTeam{a8, b8},
			setup: []wiJob{run("b", "borrower", "low", p5(2, 8))}, ask: ask("a", "low", p5(1, 8)), want: preempting("borrower")},
	}
}

func TestWhatIfAgreesWithKueue(t *testing.T) {
	testenv.AgreementSuite(t)
	cases := whatIfCases()
	var mu sync.Mutex
	var compared, agreed int
	t.Run("cases", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				predicted, actual := runWhatIf(t, tc)
				mu.Lock()
				defer mu.Unlock()
				compared++
				if diff := gocmp.Diff(predicted, actual); diff != "" {
					t.Errorf("the what-if and Kueue disagree (-what-if +Kueue):\n%s", diff)
					return
				}
				agreed++
			})
		}
	})
	t.Logf("the what-if agreed with Kueue in %d of %d cases (%d compared)", agreed, len(cases), compared)
}

// whatIfConsole is a case's console: who makes the teams and the policy,
// and who asks.
type whatIfConsole struct {
	console
	classPrefix string
	post        func(path string, form url.Values) (int, string, string)
	// asker asks the question; admin sees every team (the same as asker
	// but in a member's case).
	asker, admin func(path string) (int, string)
}

// newWhatIfConsole starts a case's console: in auth mode none, or, for a
// member's case, behind the proxy with an admin who makes the teams.
func newWhatIfConsole(t *testing.T, member bool) (whatIfConsole, string) {
	t.Helper()
	if !member {
		c := newConsole(t)
		t.Cleanup(func() { cleanupTeams(c) })
		get := func(path string) (int, string) { return c.get(t, path) }
		return whatIfConsole{console: c, post: func(path string, form url.Values) (int, string, string) { return c.post(t, path, form) },
			asker: get, admin: get}, ""
	}
	c := proxyConsole(t)
	admin := c.as(t, bindUser(t, c.kube, "admin", rbac.AdminRole), "platform")
	admin.Get("/teams/new") // the CSRF token of the admin's session
	memberName := "member-" + rand.String(5)
	return whatIfConsole{console: c, post: admin.Post, asker: c.as(t, memberName).Get, admin: admin.Get}, memberName
}

// runWhatIf sets a case up, asks the what-if, submits the job and returns
// what the what-if predicted and what Kueue did.
func runWhatIf(t *testing.T, tc wiCase) (predicted, actual wiAnswer) {
	wc, member := newWhatIfConsole(t, tc.member)
	ctx := context.Background()
	wc.classPrefix = "wi-" + rand.String(5) + "-"
	policy := url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"}}
	for i, class := range []string{"high", "mid", "low"} {
		policy.Set(fmt.Sprintf("class.%d.name", i), wc.classPrefix+class)
		policy.Set(fmt.Sprintf("class.%d.weight", i), strconv.Itoa(100-40*i))
	}
	t.Cleanup(func() {
		for _, class := range []string{"high", "mid", "low"} {
			_ = wc.kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(context.Background(), wc.classPrefix+class, metav1.DeleteOptions{})
		}
	})
	if code, _, body := wc.post("/policy", policy); code != http.StatusSeeOther {
		t.Fatalf("the policy: %d\n%.400s", code, body)
	}
	for _, tm := range tc.teams {
		members := ""
		if tm.name == tc.ask.team {
			members = member
		}
		if code, _, body := wc.post("/teams", whatIfTeamForm(tm, members)); code != http.StatusSeeOther {
			t.Fatalf("team %s: %d\n%.400s", tm.name, code, body)
		}
	}

	// The setup, one job at a time, each in its own second (Kueue orders
	// waiting jobs of a class by creation) and settled before the next.
	jobOf := map[string]string{} // Workload namespace/name → job
	running := map[string]bool{}
	for _, j := range tc.setup {
		wl := wc.submit(t, j)
		key := wl.Namespace + "/" + wl.Name
		jobOf[key], running[key] = j.name, j.running
		wc.until(t, wl, "settled as the case says", func(w *kueuev1beta2.Workload) bool {
			c := apimeta.FindStatusCondition(w.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved)
			return c != nil && (c.Status == metav1.ConditionTrue) == j.running
		})
		time.Sleep(time.Until(wl.CreationTimestamp.Add(1100 * time.Millisecond)))
	}
	time.Sleep(1100 * time.Millisecond) // the job asked about comes a second after the setup
	wc.waitSeen(t, tc.teams, running)
	if tc.member {
		waitMayList(t, wc.kube, member, wc.settings.Namespace(tc.ask.team))
	}

	reply := wc.ask(t, wc.asker, tc.ask)
	if tc.member {
		named := wc.ask(t, wc.admin, tc.ask)
		for _, p := range reply.Preempts {
			if p.Team != tc.ask.team {
				t.Errorf("the member's answer names task %s of team %s", p.Task, p.Team)
			}
		}
		if len(reply.Preempts)+reply.PreemptsHidden != len(named.Preempts) || reply.Verdict != named.Verdict {
			t.Errorf("the member's answer (%+v) is not the admin's (%+v) with other teams' tasks counted", reply, named)
		}
		reply = named
	}
	if want := wc.settings.Namespace(tc.ask.team) + "/" + wc.settings.LocalQueue(tc.ask.team); reply.LocalQueue != want {
		t.Errorf("the answer is for LocalQueue %q, want the team's %s", reply.LocalQueue, want)
	}
	if (reply.EstimatedStart == "now") != reply.Admitted || (!reply.Admitted && reply.Basis == "") {
		t.Errorf("the estimated start %q (%q) does not go with the answer %q", reply.EstimatedStart, reply.Basis, reply.Verdict)
	}
	predicted = wiAnswer{Admitted: reply.Admitted, Borrowing: reply.Borrowing, Position: reply.Position}
	for _, p := range reply.Preempts {
		predicted.Preempts = append(predicted.Preempts, cmp.Or(jobOf[p.Task], p.Task))
		// A Job's task is named by its Job, as people know it.
		if job, ok := jobOf[p.Task]; ok && !strings.HasSuffix(p.Task, "/"+job) && (p.OwnerKind != "Job" || p.OwnerName != job) {
			t.Errorf("the what-if names the task of Job %s as %s (owner %q %q)", job, p.Task, p.OwnerKind, p.OwnerName)
		}
	}
	slices.Sort(predicted.Preempts)
	if diff := gocmp.Diff(tc.want, predicted); diff != "" {
		t.Errorf("the case no longer asks what it says (-case +what-if):\n%s\n%+v", diff, reply)
	}

	asked := wc.submit(t, tc.ask)
	actual.Admitted = wc.admits(ctx, asked, predicted.Admitted)
	if actual.Admitted {
		actual.Borrowing = wc.borrows(ctx, tc.ask.team, predicted.Borrowing)
	} else {
		actual.Position = wc.position(ctx, tc.ask.team, asked)
	}
	actual.Preempts = wc.evicted(ctx, jobOf, predicted.Preempts)
	return predicted, actual
}

// whatIfTeamForm is the team form of tm with members.
func whatIfTeamForm(tm wiTeam, members string) url.Values {
	v := url.Values{"name": {tm.name}, "enabled": {"true"}, "fairShareWeight": {"10"},
		"preemption": {string(cmp.Or(tm.preemption, domain.PreemptLowerPriority))}, "lending": {string(cmp.Or(tm.lending, domain.LendAndBorrow))},
		"borrowLimit": {cmp.Or(tm.borrowPct, "100")}, "users": {members}}
	for i, q := range tm.quota {
		p := fmt.Sprintf("quota.%d.", i)
		v.Set(p+"instanceType", q.instanceType)
		if q.neuron > 0 {
			v.Set(p+"neuron", strconv.FormatInt(q.neuron, 10))
		} else {
			v.Set(p+"gpus", strconv.FormatInt(q.gpus, 10))
		}
	}
	return v
}

func (wc whatIfConsole) class(name string) string {
	if name == "" {
		return ""
	}
	return wc.classPrefix + name
}

// submit submits j to its team's queue: a Job, or a Workload of several
// pod sets; and returns its Workload once Kueue made it.
func (wc whatIfConsole) submit(t *testing.T, j wiJob) *kueuev1beta2.Workload {
	t.Helper()
	ns, lq := wc.settings.Namespace(j.team), wc.settings.LocalQueue(j.team)
	if len(j.pods) > 1 {
		if j.class != "" {
			t.Fatal("a case's job of several pod sets has no class (a Workload without a Job gets no priority from it)")
		}
		var sets []testenv.PodSet
		for _, p := range j.pods {
			sets = append(sets, testenv.PodSet{Pods: p.pods, GPUs: p.gpus, Neuron: p.neuron, InstanceType: p.instanceType})
		}
		return testenv.SubmitWorkload(t, wc.kueue, ns, lq, j.name, sets)
	}
	p := j.pods[0]
	job := testenv.Submit(t, wc.kube, testenv.Job{Namespace: ns, LocalQueue: lq, Name: j.name, Class: wc.class(j.class),
		Pods: p.pods, GPUs: p.gpus, Neuron: p.neuron, InstanceType: p.instanceType})
	return testenv.WorkloadOf(t, wc.kueue, job, "made", func(*kueuev1beta2.Workload) bool { return true })
}

// until waits (up to a minute) for wl to meet cond.
func (wc whatIfConsole) until(t *testing.T, wl *kueuev1beta2.Workload, what string, cond func(*kueuev1beta2.Workload) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cur, err := wc.kueue.KueueV1beta2().Workloads(wl.Namespace).Get(ctx, wl.Name, metav1.GetOptions{})
		return err == nil && cond(cur), nil
	})
	if err != nil {
		t.Fatalf("Workload %s/%s never %s", wl.Namespace, wl.Name, what)
	}
}

// waitSeen waits until the console's read model, fed by the cache the
// what-if copies, holds every job of the setup as Kueue does (running:
// admitted, else waiting).
func (wc whatIfConsole) waitSeen(t *testing.T, teams []wiTeam, running map[string]bool) {
	t.Helper()
	sel := domain.Selection{}
	for _, tm := range teams {
		sel.Teams = append(sel.Teams, tm.name)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		seen := 0
		for _, f := range wc.live.Snapshot().Tasks(domain.TaskQuery{Selection: sel, State: domain.ListAll}) {
			if want, ok := running[f.Namespace+"/"+f.Name]; ok && (f.State == domain.TaskAdmitted) == want {
				seen++
			}
		}
		return seen == len(running), nil
	})
	if err != nil {
		t.Fatal("the console never saw the setup's jobs as Kueue holds them")
	}
}

// whatIfReply is the what-if's JSON.
type whatIfReply struct {
	Admitted       bool   `json:"admitted"`
	Borrowing      bool   `json:"borrowing"`
	Position       int    `json:"position"`
	EstimatedStart string `json:"estimatedStart"`
	Basis          string `json:"basis"`
	Reason         string `json:"reason"`
	Preempts       []struct {
		Team      string `json:"team"`
		Task      string `json:"task"`
		OwnerKind string `json:"owner_kind"`
		OwnerName string `json:"owner_name"`
		Class     string `json:"class"`
		GPUs      int64  `json:"gpus"`
	} `json:"preempts"`
	PreemptsHidden int    `json:"preemptsHidden"`
	Uncertain      string `json:"uncertain"`
	Verdict        string `json:"verdict"`
	LocalQueue     string `json:"localQueue"`
}

// ask asks the what-if about j, each pod asking for one vCPU and 1 GiB
// as the jobs do.
func (wc whatIfConsole) ask(t *testing.T, get func(path string) (int, string), j wiJob) whatIfReply {
	t.Helper()
	q := url.Values{"team": {j.team}, "class": {wc.class(j.class)}, "format": {"json"}}
	for i, p := range j.pods {
		row := fmt.Sprintf("row.%d.", i)
		q.Set(row+"instanceType", p.instanceType)
		q.Set(row+"pods", strconv.Itoa(int(p.pods)))
		if p.neuron > 0 {
			q.Set(row+"neuron", strconv.FormatInt(p.neuron, 10))
		} else {
			q.Set(row+"gpus", strconv.FormatInt(p.gpus, 10))
		}
		q.Set(row+"vcpu", "1")
		q.Set(row+"memoryGiB", "1")
	}
	code, body := get("/whatif?" + q.Encode())
	var r whatIfReply
	if err := json.Unmarshal([]byte(body), &r); err != nil || code != http.StatusOK {
		t.Fatalf("the what-if: %d %.400s (%v)", code, body, err)
	}
	return r
}

// admits says whether Kueue admits wl. It waits for Kueue's first word on
// it (its QuotaReserved condition): for the admission the what-if predicts
// up to a minute (a preemption waits for its victims' pods to stop); for a
// wait up to 10 s (Kueue gives no word on a Workload it sets aside with an
// equal one ahead of it), then a moment more.
func (wc whatIfConsole) admits(ctx context.Context, wl *kueuev1beta2.Workload, predicted bool) bool {
	reserved := func(ctx context.Context) *metav1.Condition {
		cur, err := wc.kueue.KueueV1beta2().Workloads(wl.Namespace).Get(ctx, wl.Name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return apimeta.FindStatusCondition(cur.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved)
	}
	var c *metav1.Condition
	within := 10 * time.Second
	if predicted {
		within = time.Minute
	}
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		c = reserved(ctx)
		return c != nil && (c.Status == metav1.ConditionTrue || !predicted), nil
	})
	if c != nil && c.Status == metav1.ConditionTrue {
		return true
	}
	time.Sleep(2 * time.Second)
	c = reserved(ctx)
	return c != nil && c.Status == metav1.ConditionTrue
}

// borrows says whether the team's ClusterQueue borrows, once its status
// says what the what-if predicted (or 30 s passed: Kueue writes a queue's
// status a while after an admission on a busy machine).
func (wc whatIfConsole) borrows(ctx context.Context, team string, predicted bool) bool {
	borrowing := false
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cq, err := wc.kueue.KueueV1beta2().ClusterQueues().Get(ctx, wc.settings.ClusterQueue(team), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		borrowing = false
		for _, f := range cq.Status.FlavorsUsage {
			for _, r := range f.Resources {
				borrowing = borrowing || !r.Borrowed.IsZero()
			}
		}
		return borrowing == predicted, nil
	})
	return borrowing
}

// position is wl's place in its team's queue as Kueue's visibility API
// gives it, from 1 (0: not listed within 10 s).
func (wc whatIfConsole) position(ctx context.Context, team string, wl *kueuev1beta2.Workload) int {
	position := 0
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		sum, err := wc.kueue.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, wc.settings.ClusterQueue(team), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, it := range sum.Items {
			if it.Namespace == wl.Namespace && it.Name == wl.Name {
				position = int(it.PositionInClusterQueue) + 1
				return true, nil
			}
		}
		return false, nil
	})
	return position
}

// evicted are the setup's jobs Kueue evicted, once those the what-if
// predicted are (or 10 s passed).
func (wc whatIfConsole) evicted(ctx context.Context, jobOf map[string]string, predicted []string) []string {
	var out []string
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		out = nil
		for key, job := range jobOf {
			ns, name, _ := strings.Cut(key, "/")
			wl, err := wc.kueue.KueueV1beta2().Workloads(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadEvicted) {
				out = append(out, job)
			}
		}
		slices.Sort(out)
		return slices.Equal(out, predicted), nil
	})
	return out
}

// waitMayList waits until the cluster lets user list Workloads in ns (the
// member binding the team's save made): the console would remember an
// early "no" for half a minute.
func waitMayList(t *testing.T, kube kubernetes.Interface, user, ns string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		res, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: "list", Group: "kueue.x-k8s.io", Resource: "workloads", Namespace: ns},
		}}, metav1.CreateOptions{})
		return err == nil && res.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("%s may never list Workloads in %s", user, ns)
	}
}
