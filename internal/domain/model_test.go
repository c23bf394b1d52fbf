package domain

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/openquota/console/internal/kueuetest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// scratch is the read model computed from scratch, the way the console
// computed it before the model was incremental: every Workload read at now,
// queue positions and borrowing by sorting every queue and group, team rows
// and statistics over the whole task list.
type scratch struct {
	tasks []Task // by namespace/name
	teams []TeamUsage
}

func scratchOf(in SnapshotInput, now time.Time) scratch {
	classes := append([]*kueuev1beta2.WorkloadPriorityClass(nil), in.Classes...)
	slices.SortFunc(classes, func(a, b *kueuev1beta2.WorkloadPriorityClass) int { return strings.Compare(a.Name, b.Name) })
	order := classOrder(ReadPolicy(in.Cohort, classes), classes, nil)
	lowest := ""
	if len(order) > 0 {
		lowest = order[len(order)-1]
	}
	var sc scratch
	for _, wl := range in.Workloads {
		sc.tasks = append(sc.tasks, TaskOf(wl, in.Settings, lowest, now))
	}
	slices.SortFunc(sc.tasks, func(a, b Task) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})

	// Positions: each ClusterQueue's queued tasks in Kueue's order.
	lqToCQ := map[string]string{}
	for _, lq := range in.LocalQueues {
		lqToCQ[LocalQueueKey(lq.Namespace, lq.Name)] = string(lq.Spec.ClusterQueue)
	}
	order2 := func(at func(*Task) time.Time) func(a, b *Task) int {
		return func(a, b *Task) int {
			if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
				return c
			}
			if c := at(a).Compare(at(b)); c != 0 {
				return c
			}
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		}
	}
	byQueue := map[string][]*Task{}
	for i := range sc.tasks {
		t := &sc.tasks[i]
		cq, ok := lqToCQ[LocalQueueKey(t.Namespace, t.LocalQueue)]
		if !ok || t.LocalQueue == "" {
			continue
		}
		if t.ClusterQueue == "" {
			t.ClusterQueue = cq
		}
		if t.Queued {
			byQueue[cq] = append(byQueue[cq], t)
		}
	}
	// A task's team is its ClusterQueue's.
	for i := range sc.tasks {
		t := &sc.tasks[i]
		for _, cq := range in.ClusterQueues {
			if cq.Name == t.ClusterQueue {
				t.Team = in.Settings.TeamOfClusterQueue(cq)
			}
		}
	}
	// What Kueue has said of each queued Workload, and its shape.
	type said struct {
		untried, noFit bool
		shape, words   string
	}
	saidOf := map[string]said{}
	for _, wl := range in.Workloads {
		r := ReadWorkload(wl, in.Settings)
		saidOf[LocalQueueKey(wl.Namespace, wl.Name)] = said{r.Untried, r.NoFit, string(workload.NewInfo(wl).SchedulingHash), r.noFitWords}
	}
	strict := map[string]bool{}
	for _, cq := range in.ClusterQueues {
		strict[cq.Name] = cq.Spec.QueueingStrategy == kueuev1beta2.StrictFIFO
	}
	for cq, q := range byQueue {
		slices.SortFunc(q, order2(func(t *Task) time.Time { return t.QueueOrder }))
		for i, t := range q {
			t.Position = i + 1
		}
		// A task Kueue has not tried waits behind the first task just like
		// it that did not fit, or in a StrictFIFO queue behind its head
		// when that did not fit.
		for i, t := range q {
			me := saidOf[LocalQueueKey(t.Namespace, t.Name)]
			if !me.untried {
				continue
			}
			for _, a := range q[:i] {
				they := saidOf[LocalQueueKey(a.Namespace, a.Name)]
				if strict[cq] {
					if they.noFit {
						t.Reason = behindReason(a.Named().Shown(), they.words, true)
					}
					break
				}
				if they.noFit && they.shape == me.shape {
					t.Reason = behindReason(a.Named().Shown(), they.words, false)
					break
				}
			}
		}
	}

	// Borrowing: per ClusterQueue, flavor and resource with a nominal
	// quota, the tasks holding quota in admission order; each borrows when
	// what those before it hold and what it holds exceed the quota.
	nominal := map[string]int64{}
	for _, cq := range in.ClusterQueues {
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					if slices.Contains(BorrowedResources, r.Name) {
						nominal[cq.Name+"/"+string(f.Name)+"/"+string(r.Name)] += units(r.Name, r.NominalQuota)
					}
				}
			}
		}
	}
	type holder struct {
		task  *Task
		takes int64
	}
	index := map[string]int{}
	for i, t := range sc.tasks {
		index[t.Namespace+"/"+t.Name] = i
	}
	groups := map[string][]holder{}
	for _, wl := range in.Workloads {
		r := ReadWorkload(wl, in.Settings)
		if r.AdmittedAt.IsZero() || r.Finish != nil || r.ClusterQueue == "" {
			continue
		}
		for _, u := range r.Usage {
			for _, res := range BorrowedResources {
				key := r.ClusterQueue + "/" + u.Flavor + "/" + string(res)
				if _, ok := nominal[key]; ok && u.Of(res) > 0 {
					groups[key] = append(groups[key], holder{&sc.tasks[index[r.Namespace+"/"+r.Name]], u.Of(res)})
				}
			}
		}
	}
	for key, g := range groups {
		slices.SortFunc(g, func(a, b holder) int {
			return cmp.Or(a.task.AdmittedAt.Compare(b.task.AdmittedAt), cmp.Compare(a.task.Namespace, b.task.Namespace), cmp.Compare(a.task.Name, b.task.Name))
		})
		var held int64
		for _, h := range g {
			if held+h.takes > nominal[key] && !h.task.Borrowing {
				plain := admittedPhrase(*h.task)
				h.task.Borrowing = true
				h.task.Reason = strings.Replace(h.task.Reason, plain, admittedPhrase(*h.task), 1)
			}
			held += h.takes
		}
	}

	// Team rows.
	cqs := append([]*kueuev1beta2.ClusterQueue(nil), in.ClusterQueues...)
	slices.SortFunc(cqs, func(a, b *kueuev1beta2.ClusterQueue) int { return strings.Compare(a.Name, b.Name) })
	served := map[string][]string{}
	for _, lq := range in.LocalQueues {
		cq := string(lq.Spec.ClusterQueue)
		if !slices.Contains(served[cq], lq.Namespace) {
			served[cq] = append(served[cq], lq.Namespace)
			slices.Sort(served[cq])
		}
	}
	sc.teams = queueRows(in.Settings, cqs, served, CohortForestOf(in.Cohorts))
	byTeam := map[string]int{}
	for i, r := range sc.teams {
		byTeam[r.Team] = i
	}
	for _, t := range sc.tasks {
		i, ok := byTeam[t.Team]
		if !ok {
			continue
		}
		switch t.State {
		case TaskAdmitted:
			sc.teams[i].Running++
		case TaskPending:
			if !t.Deactivated {
				sc.teams[i].Pending++
				sc.teams[i].PendingDemand.add(demand(t.Requests, t.GPUs))
			}
		case TaskPreempted:
			sc.teams[i].Preempted++
			sc.teams[i].PendingDemand.add(demand(t.Requests, t.GPUs))
		}
	}
	return sc
}

// scratchListOrder is the task list's default order over shown tasks.
func scratchListOrder(ts []Task) []string {
	rank := map[TaskState]int{TaskPreempted: 0, TaskPending: 0, TaskAdmitted: 1, TaskFinished: 2}
	sorted := slices.Clone(ts)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if rank[a.State] != rank[b.State] {
			return rank[a.State] < rank[b.State]
		}
		switch a.State {
		case TaskPending, TaskPreempted:
			if (a.Position == 0) != (b.Position == 0) {
				return a.Position != 0
			}
			if a.Position != b.Position {
				return a.Position < b.Position
			}
		case TaskAdmitted:
			if !a.AdmittedAt.Equal(b.AdmittedAt) {
				return a.AdmittedAt.After(b.AdmittedAt)
			}
		case TaskFinished:
			if !a.FinishedAt.Equal(b.FinishedAt) {
				return a.FinishedAt.After(b.FinishedAt)
			}
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	names := make([]string, len(sorted))
	for i, t := range sorted {
		names[i] = t.Namespace + "/" + t.Name
	}
	return names
}

// scratchOngoing is what still runs or waits, per team and class, from
// every task at now.
func scratchOngoing(tasks []Task, windowStart, now time.Time) []Ongoing {
	byKey := map[teamAndClass]*Ongoing{}
	for _, t := range tasks {
		k := teamAndClass{t.Team, t.Class}
		o := byKey[k]
		if o == nil {
			o = &Ongoing{Team: t.Team, Class: t.Class}
			byKey[k] = o
		}
		if t.AdmittedAt.After(o.LastAdmission) {
			o.LastAdmission = t.AdmittedAt
		}
		switch {
		case t.State == TaskAdmitted:
			o.Running++
			o.Runs++
			o.RunSum += t.Run
			o.LongestRun = max(o.LongestRun, t.Run)
			if !inWindow(t.AdmittedAt, windowStart, now) {
				o.Samples++
			}
		case (t.State == TaskPending || t.State == TaskPreempted) && !t.Deactivated:
			if t.State == TaskPending {
				o.Pending++
			} else {
				o.Preempted++
			}
			if t.AdmittedAt.IsZero() {
				o.Waits++
				o.WaitSum += t.Wait
				o.LongestWait = max(o.LongestWait, t.Wait)
				o.Samples++
			}
		}
	}
	var out []Ongoing
	for _, o := range byKey {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b Ongoing) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.Class, b.Class))
	})
	return out
}

// churn is a cluster that a random sequence of events changes, as Kueue and
// users would: Workloads created, admitted, preempted, evicted, requeued,
// finished, deactivated and deleted; queues' quotas and usage changed;
// priority classes re-weighted; a LocalQueue re-pointed.
type churn struct {
	rnd       *rand.Rand
	now       time.Time
	teams     []string
	workloads map[string]*kueuetest.WorkloadWrapper
	cqs       map[string]*kueuev1beta2.ClusterQueue
	lqs       map[string]*kueuev1beta2.LocalQueue
	classes   map[string]*kueuev1beta2.WorkloadPriorityClass
	next      int
	// placement is where the cache last heard the model puts tasks: it
	// lags behind the model's own, as an informer's goroutine may.
	placement *Placement
}

func newChurn(seed uint64, start time.Time) *churn {
	c := &churn{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: start,
		workloads: map[string]*kueuetest.WorkloadWrapper{}, cqs: map[string]*kueuev1beta2.ClusterQueue{},
		lqs: map[string]*kueuev1beta2.LocalQueue{}, classes: map[string]*kueuev1beta2.WorkloadPriorityClass{}}
	for i := range 12 {
		team := fmt.Sprintf("t%02d", i)
		c.teams = append(c.teams, team)
		c.cqs[team] = kueuetest.MakeClusterQueue(DefaultSettings.ClusterQueue(team)).Cohort(DefaultSettings.Cohort).
			Nominal(int64(8*(i%3)), nil).Usage(int64(i%5), 0).Obj()
		ns := DefaultSettings.Namespace(team)
		c.lqs[ns+"/lq"] = &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lq"},
			Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(c.cqs[team].Name)}}
	}
	// A second queue of team t00 that feeds t01's ClusterQueue.
	c.lqs[DefaultSettings.Namespace("t00")+"/shared"] = &kueuev1beta2.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: DefaultSettings.Namespace("t00"), Name: "shared"},
		Spec:       kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(c.cqs["t01"].Name)}}
	for i, name := range []string{"critical", "training", "batch", "spare"} {
		c.classes[name] = &kueuev1beta2.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: int32(100 - 30*i)}
	}
	return c
}

func (c *churn) input() SnapshotInput {
	in := SnapshotInput{Settings: DefaultSettings}
	for _, cq := range c.cqs {
		in.ClusterQueues = append(in.ClusterQueues, cq)
	}
	for _, lq := range c.lqs {
		in.LocalQueues = append(in.LocalQueues, lq)
	}
	for _, wl := range c.workloads {
		in.Workloads = append(in.Workloads, wl.Obj())
	}
	for _, pc := range c.classes {
		in.Classes = append(in.Classes, pc)
	}
	return in
}

// pick is a random Workload whose State is one of states.
func (c *churn) pick(states ...TaskState) (string, *kueuetest.WorkloadWrapper) {
	keys := make([]string, 0, len(c.workloads))
	for k := range c.workloads {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	c.rnd.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		if slices.Contains(states, TaskOf(c.workloads[k].Obj(), DefaultSettings, "", c.now).State) {
			return k, c.workloads[k]
		}
	}
	return "", nil
}

// at is a time for a condition: now, or a little in the future (clock skew).
func (c *churn) at() time.Time {
	if c.rnd.IntN(20) == 0 {
		return c.now.Add(time.Duration(c.rnd.IntN(90)) * time.Second)
	}
	return c.now
}

// step applies one random event to m and to the cluster.
func (c *churn) step(m *Model) {
	c.now = c.now.Add(time.Duration(c.rnd.IntN(120)) * time.Second)
	flavors := []string{p5, p4d}
	set := func(key string, w *kueuetest.WorkloadWrapper) {
		c.workloads[key] = w
		if c.rnd.IntN(3) == 0 {
			m.SetWorkload(w.Obj())
			return
		}
		// As the cache gives tasks: placed where the model put them when
		// the cache last heard, which may be before a queue moved.
		if c.placement == nil || c.rnd.IntN(10) == 0 {
			c.placement = m.Placement()
		}
		f := FactsOf(w.Obj(), DefaultSettings, "")
		c.placement.Place(f)
		m.SetTask(f)
	}
	switch r := c.rnd.IntN(100); {
	case r < 25 || len(c.workloads) < 20: // a new Workload
		c.next++
		ns := DefaultSettings.Namespace(c.teams[c.rnd.IntN(len(c.teams))])
		if c.rnd.IntN(15) == 0 {
			ns = "default"
		}
		w := kueuetest.MakeWorkload(DefaultSettings, ns, fmt.Sprintf("wl-%05d", c.next)).
			GPUs(int64(c.rnd.IntN(9)), int32(1+c.rnd.IntN(2))).Priority(int32(c.rnd.IntN(4) * 10)).
			Created(c.now.Add(-time.Duration(c.rnd.IntN(3*3600)) * time.Second))
		switch q := c.rnd.IntN(20); {
		case q == 0:
			w.Queue("ghost")
		case q == 1 && ns == DefaultSettings.Namespace("t00"):
			w.Queue("shared")
		case q != 2:
			w.Queue("lq")
		}
		if cl := c.rnd.IntN(5); cl < 4 {
			w.Class([]string{"critical", "training", "batch", "spare"}[cl])
		}
		if c.rnd.IntN(2) == 0 {
			w.Pending(kueuev1beta2.WorkloadQuotaReservedReasonWaitingForQuota, gpuShortMsg, c.at())
		}
		set(ns+"/"+w.Name, w)
	case r < 45: // admitted
		if k, w := c.pick(TaskPending, TaskPreempted); w != nil && w.Spec.Active == nil {
			set(k, w.Clone().Admitted(c.at(), flavors[c.rnd.IntN(2)]))
		}
	case r < 53: // preempted, requeued at once or later
		if k, w := c.pick(TaskAdmitted); w != nil {
			msg := preemptionMsg("reclamation within the cohort", DefaultSettings.ClusterQueue(c.teams[c.rnd.IntN(len(c.teams))]))
			w = w.Clone().Preempted(c.at(), kueuev1beta2.InCohortReclamationReason, msg)
			if c.rnd.IntN(2) == 0 {
				w.Requeued(c.now.Add(time.Minute))
			}
			set(k, w)
		}
	case r < 58: // evicted by a PodsReady timeout, in backoff
		if k, w := c.pick(TaskAdmitted); w != nil {
			set(k, w.Clone().Evicted(c.at(), kueuev1beta2.WorkloadEvictedByPodsReadyTimeout, "Exceeded the PodsReady timeout").
				RequeueAt(c.now.Add(time.Duration(c.rnd.IntN(3600))*time.Second)))
		}
	case r < 72: // finished
		if k, w := c.pick(TaskAdmitted, TaskAdmitted, TaskPending); w != nil {
			set(k, w.Clone().Finished(c.at(), kueuev1beta2.WorkloadFinishedReasonSucceeded))
		}
	case r < 75: // deactivated
		if k, w := c.pick(TaskPending); w != nil {
			set(k, w.Clone().Inactive().Pending(kueuev1beta2.WorkloadInadmissible, "The workload is deactivated", c.at()))
		}
	case r < 82: // the scheduler says something new
		if k, w := c.pick(TaskPending, TaskPreempted); w != nil {
			set(k, w.Clone().Pending(kueuev1beta2.WorkloadQuotaReservedReasonWaitingForQuota,
				strings.Replace(gpuShortMsg, "4 more", fmt.Sprintf("%d more", 1+c.rnd.IntN(8)), 1), c.at()))
		}
	case r < 92: // deleted
		if k, w := c.pick(TaskPending, TaskAdmitted, TaskPreempted, TaskFinished); w != nil {
			delete(c.workloads, k)
			m.DeleteWorkload(w.Namespace, w.Name)
		}
	case r < 97: // a team's quota or usage changes
		team := c.teams[c.rnd.IntN(len(c.teams))]
		var limit *int64
		if c.rnd.IntN(3) == 0 {
			limit = ptr.To(int64(c.rnd.IntN(8)))
		}
		used := int64(c.rnd.IntN(20))
		cq := kueuetest.MakeClusterQueue(DefaultSettings.ClusterQueue(team)).Cohort(DefaultSettings.Cohort).
			Nominal(int64(c.rnd.IntN(4)*8), limit).Usage(used, max(0, used-8)).Obj()
		if c.rnd.IntN(10) == 0 {
			delete(c.cqs, team)
			m.DeleteClusterQueue(cq.Name)
			break
		}
		c.cqs[team] = cq
		m.SetClusterQueue(cq)
	case r < 99: // a priority class re-weighted (the lowest class may change)
		name := []string{"critical", "training", "batch", "spare"}[c.rnd.IntN(4)]
		pc := c.classes[name].DeepCopy()
		pc.Value = int32(c.rnd.IntN(120))
		c.classes[name] = pc
		var all []*kueuev1beta2.WorkloadPriorityClass
		for _, x := range c.classes {
			all = append(all, x)
		}
		m.SetPolicyObjects(nil, all)
	default: // team t00's shared queue re-pointed
		key := DefaultSettings.Namespace("t00") + "/shared"
		lq := &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultSettings.Namespace("t00"), Name: "shared"},
			Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(DefaultSettings.ClusterQueue(c.teams[c.rnd.IntN(len(c.teams))]))}}
		if c.rnd.IntN(4) == 0 {
			delete(c.lqs, key)
			m.DeleteLocalQueue(lq.Namespace, lq.Name)
			break
		}
		c.lqs[key] = lq
		m.SetLocalQueue(lq)
	}
}

// TestIncrementalModelMatchesScratch applies 10 000 random events one at a
// time and compares, at checkpoints, every task, team row, statistic and
// the list order with a from-scratch computation, at the checkpoint's time
// and later (figures that grow with the clock).
func TestIncrementalModelMatchesScratch(t *testing.T) {
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	c := newChurn(7, start)
	m := NewModel(DefaultSettings)
	m.Load(c.input())
	windows := []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}
	seen := map[string]int{} // what the checkpoints covered
	defer func() {
		for _, what := range []string{"Pending", "Admitted", "Preempted", "Finished", "borrowing", "queued", "requeue countdown", "deactivated", "outside teams"} {
			if seen[what] == 0 {
				t.Errorf("no checkpoint saw a task %s: the events do not cover it (%v)", what, seen)
			}
		}
	}()
	for i := 1; i <= 10_000; i++ {
		c.step(m)
		if i%3 == 0 {
			m.Snapshot(c.now) // as the console takes them: often, each sharing what did not change
		}
		if i%250 != 0 {
			continue
		}
		for _, later := range []time.Duration{0, 37 * time.Minute, 5 * time.Hour} {
			now := c.now.Add(later)
			snap := m.Snapshot(now)
			sc := scratchOf(c.input(), now)
			compareWithScratch(t, fmt.Sprintf("after %d events, %s later", i, later), snap, sc, windows)
			for _, task := range sc.tasks {
				seen[string(task.State)]++
				for what, ok := range map[string]bool{"borrowing": task.Borrowing, "queued": task.Position > 0,
					"requeue countdown": strings.Contains(task.Reason, "back in the queue in"),
					"deactivated":       task.Deactivated, "outside teams": task.Team == ""} {
					if ok {
						seen[what]++
					}
				}
			}
			if t.Failed() {
				return
			}
		}
	}
}

func compareWithScratch(t *testing.T, when string, snap *Snapshot, sc scratch, windows []time.Duration) {
	t.Helper()
	all := snap.Tasks(TaskQuery{State: ListAll})
	got := make([]Task, len(all))
	for i, f := range all {
		got[i] = snap.Task(f)
	}
	if diff := gocmp.Diff(scratchListOrder(sc.tasks), scratchListOrder(got)); diff != "" {
		t.Fatalf("%s: tasks (-scratch +model):\n%s", when, diff)
	}
	var order []string
	for _, f := range all {
		order = append(order, f.Namespace+"/"+f.Name)
	}
	if diff := gocmp.Diff(scratchListOrder(sc.tasks), order); diff != "" {
		t.Errorf("%s: list order (-scratch +model):\n%s", when, diff)
	}
	// A page of the first order comes from the queues' first tasks alone:
	// the same tasks as the page of the whole list.
	for _, q := range []TaskQuery{{}, {State: ListAll}, {State: ListQueued}, {Search: "1"}, {State: ListAll, Search: "w2"},
		{Selection: Selection{Class: "training"}}} {
		list := snap.Tasks(q)
		for _, pg := range [][2]int{{0, 50}, {50, 100}, {0, 7}, {3, 20}, {100, 2000}, {len(list) - 5, len(list) + 45}, {len(list) + 50, len(list) + 100}} {
			from, to := max(pg[0], 0), max(pg[1], 0)
			page, total := snap.TasksPage(q, from, to)
			want := list[min(from, len(list)):min(to, len(list))]
			if total != len(list) || !slices.Equal(page, want) {
				t.Fatalf("%s: TasksPage(%+v, %d, %d) = %d tasks of %d, want %d of %d", when, q, from, to, len(page), total, len(want), len(list))
			}
		}
	}
	// A narrower list (one team, unfinished, sorted the other way) comes
	// from another path: the same order.
	var teamTasks []Task
	for _, task := range sc.tasks {
		if task.Team == "t03" && task.State != TaskFinished {
			teamTasks = append(teamTasks, task)
		}
	}
	want := scratchListOrder(teamTasks)
	slices.Reverse(want)
	var gotTeam []string
	for _, f := range snap.Tasks(TaskQuery{Selection: Selection{Teams: []string{"t03"}}, Desc: true}) {
		gotTeam = append(gotTeam, f.Namespace+"/"+f.Name)
	}
	if diff := gocmp.Diff(want, gotTeam); diff != "" {
		t.Errorf("%s: one team's list, reversed (-scratch +model):\n%s", when, diff)
	}
	slices.SortFunc(got, func(a, b Task) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	if diff := gocmp.Diff(sc.tasks, got); diff != "" {
		t.Errorf("%s: tasks (-scratch +model):\n%s", when, diff)
	}
	if diff := gocmp.Diff(sc.teams, snap.Teams); diff != "" {
		t.Errorf("%s: team rows (-scratch +model):\n%s", when, diff)
	}
	teams := snap.TeamNames()
	for _, w := range windows {
		start := snap.Taken.Add(-w)
		if diff := gocmp.Diff(StatsByClass(sc.tasks, snap.Classes, start, snap.Taken),
			snap.StatsByClass(Selection{}, snap.Classes, w, snap.Taken)); diff != "" {
			t.Errorf("%s: stats by class over %s (-scratch +model):\n%s", when, w, diff)
		}
		if diff := gocmp.Diff(StatsByTeamAndClass(sc.tasks, teams, snap.Classes, start, snap.Taken),
			snap.StatsByTeamAndClass(Selection{}, teams, snap.Classes, w, snap.Taken)); diff != "" {
			t.Errorf("%s: stats by team and class over %s (-scratch +model):\n%s", when, w, diff)
		}
		if diff := gocmp.Diff(scratchOngoing(sc.tasks, start, snap.Taken), snap.Ongoing(Selection{}, w, snap.Taken)); diff != "" {
			t.Errorf("%s: ongoing figures over %s (-scratch +model):\n%s", when, w, diff)
		}
		one := []Task{}
		for _, task := range sc.tasks {
			if task.Team == "t03" && task.Class == "training" {
				one = append(one, task)
			}
		}
		if diff := gocmp.Diff(StatsByClass(one, []string{"training"}, start, snap.Taken),
			snap.StatsByClass(Selection{Teams: []string{"t03"}, Class: "training"}, []string{"training"}, w, snap.Taken)); diff != "" {
			t.Errorf("%s: stats of one team and class over %s (-scratch +model):\n%s", when, w, diff)
		}
	}
}

// A task the cache placed as the model would is kept as it is, not
// copied (the facts of 50 000 Workloads are held once); one placed before
// its LocalQueue moved is placed again.
func TestPlacedTasksAreKeptAsTheyAre(t *testing.T) {
	s := DefaultSettings
	now := time.Date(2026, 11, 25, 12, 0, 5, 0, time.UTC)
	objs := kueuetest.Cluster(s, s.Cohort, 3, 0, now)
	for _, cq := range objs.ClusterQueues {
		cq.Spec.NamespaceSelector = &metav1.LabelSelector{} // a LocalQueue may move to any of them
	}
	m := NewModel(s)
	m.Load(SnapshotInput{Settings: s, ClusterQueues: objs.ClusterQueues, LocalQueues: objs.LocalQueues, Classes: objs.Classes})
	pending := func(name string) *kueuev1beta2.Workload {
		return kueuetest.MakeWorkload(s, s.Namespace("team-001"), name).Queue(s.LocalQueue("team-001")).
			GPUs(1, 1).Created(now).Pending("Pending", "waits for quota", now).Obj()
	}
	held := func(name string) *TaskFacts {
		for _, f := range m.Snapshot(now).Tasks(TaskQuery{State: ListAll}) {
			if f.Name == name {
				return f
			}
		}
		t.Fatalf("the model has no task %s", name)
		return nil
	}

	placed := FactsOf(pending("placed"), s, "")
	before := m.Placement()
	before.Place(placed)
	m.SetTask(placed)
	if got := held("placed"); got != placed {
		t.Errorf("the model copied a task the cache had placed: %+v", got)
	}
	if placed.Team != "team-001" || placed.ClusterQueue != s.ClusterQueue("team-001") || placed.queue != s.ClusterQueue("team-001") || placed.Class == "" {
		t.Errorf("placed = team %q, ClusterQueue %q, queue %q, class %q: want team-001's queue and the lowest class",
			placed.Team, placed.ClusterQueue, placed.queue, placed.Class)
	}
	if m.Placement() != before {
		t.Error("the placement changed with a task: the cache would be given a new one for every Workload")
	}

	// The team's LocalQueue now feeds team-002's ClusterQueue; the cache
	// still places with what it heard before.
	m.SetLocalQueue(kueuetest.MakeLocalQueue(s.Namespace("team-001"), s.LocalQueue("team-001"), s.ClusterQueue("team-002")))
	stale := FactsOf(pending("stale"), s, "")
	before.Place(stale)
	m.SetTask(stale)
	got := held("stale")
	if got == stale || got.ClusterQueue != s.ClusterQueue("team-002") || got.Team != "team-002" {
		t.Errorf("a task placed before its LocalQueue moved: kept as given %v, ClusterQueue %q, team %q; want a copy in team-002's",
			got == stale, got.ClusterQueue, got.Team)
	}
	if m.Placement() == before {
		t.Error("the placement did not change when a LocalQueue moved")
	}
}

// Kueue's concurrent admission tries a job on each flavor through Variant
// Workloads: the job is one task, whose reason says what its Variants are
// doing, whichever of them the model hears of first.
func TestConcurrentAdmissionVariantsAreNotTasks(t *testing.T) {
	s := DefaultSettings
	now := time.Date(2026, 11, 25, 12, 0, 5, 0, time.UTC)
	flavors := []string{"reservation", "on-demand", "spot"}
	cq := kueuetest.MakeClusterQueue("team-cluster-queue").Obj()
	rg := kueuev1beta2.ResourceGroup{CoveredResources: []corev1.ResourceName{kueuetest.GPU}}
	for _, fl := range flavors {
		rg.Flavors = append(rg.Flavors, kueuev1beta2.FlavorQuotas{Name: kueuev1beta2.ResourceFlavorReference(fl),
			Resources: []kueuev1beta2.ResourceQuota{{Name: kueuetest.GPU, NominalQuota: resource.MustParse("4")}}})
	}
	cq.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{rg}
	lq := kueuetest.MakeLocalQueue("default", "team-queue", cq.Name)
	job := func(name string) *kueuetest.WorkloadWrapper {
		return kueuetest.MakeWorkload(s, "default", "job-"+name).WithUID("uid-"+name).Queue(lq.Name).GPUs(3, 1).Created(now.Add(-time.Minute)).
			OwnedBy("Job", name, true)
	}
	noRoom := func(flavor string) string {
		return "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor " + flavor + ", 2 more needed"
	}
	// mid runs on on-demand and would rather be on reservation (spot no
	// longer tried); waiting fits nowhere; large lost spot to a preemption
	// (Kueue preempted its Variant there and evicted its own Workload).
	mid := job("mid").In(cq.Name).Admitted(now.Add(-30*time.Second), "on-demand").Obj()
	// big runs on spot; reservation and on-demand can never hold it.
	big := job("big").In(cq.Name).Admitted(now.Add(-30*time.Second), "spot").Obj()
	tooBig := func(flavor string) string {
		return "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor " + flavor +
			", previously considered podsets requests (0) + current podset request (3) > maximum capacity (2)"
	}
	waiting := job("waiting").Obj()
	const preemption = "Preempted to accommodate a workload (UID: u-1, JobUID: j-1) due to prioritization in the ClusterQueue; " +
		"preemptor path: /team-cluster-queue; preemptee path: /team-cluster-queue"
	large := job("large").In(cq.Name).Admitted(now.Add(-time.Minute), "spot").Evicted(now, "VariantEvicted", "Admitted variant was evicted").Obj()
	variant := func(parent *kueuev1beta2.Workload, flavor string) *kueuetest.WorkloadWrapper {
		return kueuetest.MakeWorkload(s, "default", parent.Name+"-variant-"+flavor).Queue(lq.Name).GPUs(3, 1).Created(now.Add(-time.Minute)).
			VariantOf(parent, flavor)
	}
	variants := []*kueuev1beta2.Workload{
		variant(mid, "reservation").Pending("Pending", noRoom("reservation"), now).Obj(),
		variant(mid, "on-demand").In(cq.Name).Admitted(now.Add(-30*time.Second), "on-demand").Obj(),
		variant(mid, "spot").Inactive().Pending("Pending", "A more favorable variant is already admitted", now).Obj(),
		variant(waiting, "spot").Pending("Pending", noRoom("spot"), now).Obj(),
		variant(waiting, "reservation").Pending("Pending", noRoom("reservation"), now).Obj(),
		variant(waiting, "on-demand").Obj(),
		variant(large, "spot").In(cq.Name).Admitted(now.Add(-time.Minute), "spot").Preempted(now, "InClusterQueue", preemption).Obj(),
		variant(big, "reservation").Pending("Pending", tooBig("reservation"), now).Obj(),
		variant(big, "on-demand").Pending("Pending", tooBig("on-demand"), now).Obj(),
		variant(big, "spot").In(cq.Name).Admitted(now.Add(-30*time.Second), "spot").Obj(),
	}
	wantReasons := map[string]string{
		"job-mid": "Admitted on flavor on-demand; Kueue moves it to reservation as soon as that has room (concurrent admission)",
		"job-big": "Admitted on flavor spot",
		"job-waiting": "Tried on each flavor at once (Kueue's concurrent admission). " +
			"reservation: Waiting for quota: needs 2 more nvidia.com/gpu on reservation; " +
			"on-demand: Waiting to be evaluated by the scheduler; " +
			"spot: Waiting for quota: needs 2 more nvidia.com/gpu on spot",
		"job-large": "Tried on each flavor at once (Kueue's concurrent admission). " +
			"spot: Preempted by a higher-priority task of the same team",
	}

	for _, order := range []struct {
		name string
		wls  []*kueuev1beta2.Workload
	}{
		{"jobs first", append([]*kueuev1beta2.Workload{mid, waiting, large, big}, variants...)},
		{"variants first", append(slices.Clone(variants), mid, waiting, large, big)},
	} {
		t.Run(order.name, func(t *testing.T) {
			m := NewModel(s)
			m.Load(SnapshotInput{Settings: s, ClusterQueues: []*kueuev1beta2.ClusterQueue{cq}, LocalQueues: []*kueuev1beta2.LocalQueue{lq}})
			for _, wl := range order.wls {
				m.SetWorkload(wl)
			}
			snap := m.Snapshot(now)
			got := map[string]string{}
			positions := map[string]int{}
			states := map[string]TaskState{}
			for _, f := range snap.Tasks(TaskQuery{State: ListAll}) {
				task := snap.Task(f)
				got[f.Name], positions[f.Name], states[f.Name] = task.Reason, task.Position, task.State
			}
			if diff := gocmp.Diff(map[string]TaskState{"job-mid": TaskAdmitted, "job-big": TaskAdmitted, "job-waiting": TaskPending, "job-large": TaskPreempted}, states); diff != "" {
				t.Errorf("the tasks' states (-want +got):\n%s", diff)
			}
			if diff := gocmp.Diff(wantReasons, got); diff != "" {
				t.Errorf("the tasks and their reasons (-want +got):\n%s", diff)
			}
			if positions["job-large"] != 1 || positions["job-waiting"] != 2 {
				t.Errorf("queue positions %v, want job-large first (created first) and job-waiting second: the Variants wait for them, not beside them", positions)
			}
			stats := snap.StatsByClass(Selection{}, nil, time.Hour, now)
			var running, pending, preempted int
			for _, st := range stats {
				running, pending, preempted = running+st.Running, pending+st.Pending, preempted+st.Preempted
			}
			if running != 2 || pending != 1 || preempted != 1 {
				t.Errorf("%d running, %d pending and %d preempted tasks, want 2, 1 and 1", running, pending, preempted)
			}

			// Its spot Variant admitted again, large waits no more.
			m.SetWorkload(variant(large, "spot").In(cq.Name).Admitted(now, "spot").Obj())
			m.SetWorkload(job("large").In(cq.Name).Admitted(now, "spot").Obj())
			snap = m.Snapshot(now)
			if got := snap.Task(snap.Find("default", "job-large")); got.State != TaskAdmitted || got.Reason != "Admitted on flavor spot" {
				t.Errorf("job-large admitted again: %s, %q", got.State, got.Reason)
			}

			// Gone, the Variant of reservation no longer says mid may move.
			m.DeleteWorkload("default", "job-mid-variant-reservation")
			snap = m.Snapshot(now)
			if got := snap.Task(snap.Find("default", "job-mid")).Reason; got != "Admitted on flavor on-demand" {
				t.Errorf("job-mid's reason after its last tried Variant went: %q", got)
			}
		})
	}
}

// An elastic job that grew runs on in a new slice, which replaced the
// first: one task, running since the first slice's admission, whichever
// slice the model hears of first.
func TestAnElasticJobsSlicesAreOneTask(t *testing.T) {
	s := DefaultSettings
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	slice := func(name string) *kueuetest.WorkloadWrapper {
		return kueuetest.MakeWorkload(s, s.Namespace("team-000"), name).Queue(s.LocalQueue("team-000")).OwnedBy("Job", "elastic", true).
			Annotation("kueue.x-k8s.io/elastic-job", "true").Annotation(kueuev1beta2.WorkloadSliceNameAnnotation, "job-elastic-1")
	}
	first := slice("job-elastic-1").GPUs(1, 2).Created(t0).Admitted(t0.Add(time.Minute), "ml.p5.48xlarge").
		Finished(t0.Add(10*time.Minute), kueuev1beta2.WorkloadSliceReplaced).Obj()
	grown := slice("job-elastic-2").Annotation("kueue.x-k8s.io/workload-slice-replacement-for", "default/job-elastic-1").
		GPUs(1, 4).Created(t0.Add(9*time.Minute)).Admitted(t0.Add(10*time.Minute), "ml.p5.48xlarge").Obj()
	for _, order := range [][]*kueuev1beta2.Workload{{first, grown}, {grown, first}} {
		m := NewModel(s)
		m.Load(SnapshotInput{Settings: s, ClusterQueues: objs.ClusterQueues, LocalQueues: objs.LocalQueues, Classes: objs.Classes})
		for _, wl := range order {
			m.SetWorkload(wl)
		}
		snap := m.Snapshot(now)
		var got []string
		for _, f := range snap.Tasks(TaskQuery{State: ListAll}) {
			task := snap.Task(f)
			got = append(got, fmt.Sprintf("%s %s %d GPUs, waited %s, ran %s", f.Name, task.State, task.GPUs, task.Wait, task.Run))
		}
		want := []string{"job-elastic-2 Admitted 4 GPUs, waited 1m0s, ran 59m0s"}
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("first %s: the tasks (-want +got):\n%s", order[0].Name, diff)
		}
		var runs int
		var avg time.Duration
		for _, st := range snap.StatsByClass(Selection{}, nil, 24*time.Hour, now) {
			if st.RunSamples > 0 {
				runs, avg = runs+st.RunSamples, st.AvgRun
			}
		}
		if runs != 1 || avg != 59*time.Minute {
			t.Errorf("first %s: %d runs averaging %s, want the job's one of 59m: the replaced slice is no task of its own", order[0].Name, runs, avg)
		}
		m.DeleteWorkload(first.Namespace, first.Name)
		if snap = m.Snapshot(now); len(snap.Tasks(TaskQuery{State: ListAll})) != 1 {
			t.Errorf("first %s: the replaced slice's deletion took the task", order[0].Name)
		}
	}
}

// A team's row says how its queue is stopped and which of its LocalQueues
// are: Kueue admits nothing there, and the pages say where.
func TestATeamRowNamesItsStoppedQueues(t *testing.T) {
	s := DefaultSettings
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	objs.ClusterQueues[1].Spec.StopPolicy = ptrTo(kueuev1beta2.HoldAndDrain)
	m := NewModel(s)
	m.Load(SnapshotInput{Settings: s, ClusterQueues: objs.ClusterQueues, LocalQueues: objs.LocalQueues, Classes: objs.Classes})
	held := kueuetest.MakeLocalQueue(s.Namespace("team-000"), "urgent", s.ClusterQueue("team-000"))
	held.Spec.StopPolicy = ptrTo(kueuev1beta2.Hold)
	m.SetLocalQueue(held)

	row := func(team string) TeamUsage {
		for _, u := range m.Snapshot(now).Teams {
			if u.Team == team {
				return u
			}
		}
		t.Fatalf("no row for %s", team)
		return TeamUsage{}
	}
	if got, want := row("team-000").StoppedLocalQueues, []string{s.Namespace("team-000") + "/urgent (stopPolicy Hold)"}; !slices.Equal(got, want) {
		t.Errorf("team-000's stopped LocalQueues = %q, want %q", got, want)
	}
	if u := row("team-001"); u.Enabled || !u.Drained || !strings.Contains(u.Stop, "HoldAndDrain") {
		t.Errorf("team-001: enabled %v, drained %v, stop %q", u.Enabled, u.Drained, u.Stop)
	}
	// Started again, the LocalQueue no longer shows.
	held.Spec.StopPolicy = nil
	m.SetLocalQueue(held)
	if got := row("team-000").StoppedLocalQueues; got != nil {
		t.Errorf("after the LocalQueue started: %q", got)
	}
}
