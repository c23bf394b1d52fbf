package impact_test

// The harness measures the impact preview against the real Kueue: each
// scenario sets up teams and jobs in the test sandbox (a real apiserver and
// Kueue v0.19.2 with its webhooks, fair sharing on), waits until Kueue
// settles, reads the live objects into an impact.Cluster, lets the preview
// predict what a change will do, makes the same change in the sandbox, waits
// until Kueue settles again and compares, Workload by Workload, the
// predicted fate with what Kueue did.
//
// docs/preview.md has its figures and what the disagreements come from.
//
// Environment:
//   - IMPACT_HARNESS_REPORT=<file> writes the figures as a Markdown table;
//   - IMPACT_HARNESS_PARALLEL=<n> runs n scenarios at once (8);
//   - IMPACT_HARNESS_TRACE=1 logs each change of a scenario's Workloads;
//   - IMPACT_HARNESS_KEEP=1 leaves the scenarios' objects in the sandbox;
//   - IMPACT_HARNESS_CLASS_ORDER=ascending writes changed priority classes
//     lowest first instead of the console's order.

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"
	kueuelisters "sigs.k8s.io/kueue/client-go/listers/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue/impact"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/sandbox"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// gpuFlavor is the sandbox's H100 instance type, the flavor every
// scenario's quota is on (as the console writes it: named after the
// instance type, selecting its nodes).
const gpuFlavor = "ml.p5.48xlarge"

// scenarioLabel marks every object a scenario creates.
const scenarioLabel = "impact-harness.openquota.dev/scenario"

// sandboxFairSharing is the sandbox's Kueue configuration (sandbox/kueue.go).
var sandboxFairSharing = &config.FairSharing{PreemptionStrategies: []config.PreemptionStrategy{
	config.LessThanOrEqualToFinalShare, config.LessThanInitialShare}}

// agreementFloor fails the harness below it.
const agreementFloor = 98.0

// Fates the harness finds that the preview has no name for.
const (
	fateDeleted = "deleted"
	fateEvicted = "evicted" // for another reason than a preemption
)

// harness is what the scenarios share: the sandbox's clients and one
// watch of every Workload (a scenario polls its own from the informer's
// store, not the apiserver).
type harness struct {
	c         testenv.Clients
	workloads kueuelisters.WorkloadLister

	mu sync.Mutex
	// preemptions are the Workloads seen evicted by a preemption, and when.
	preemptions map[string][]time.Time
	// cleanups delete what the scenarios created, when the harness ends:
	// deleting a scenario's Jobs as soon as it ends would make Kueue, which
	// reconciles Jobs one at a time, slower for the scenarios still running.
	cleanups []func()
}

func (h *harness) cleanup(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cleanups = append(h.cleanups, f)
}

// TestMain lets the harness's scenarios run side by side: they spend their
// time waiting for Kueue, not computing, and go test would run only
// GOMAXPROCS of them at once. An explicit -parallel wins;
// IMPACT_HARNESS_PARALLEL sets the default (harnessParallel).
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		n := harnessParallel
		if v, err := strconv.Atoi(os.Getenv("IMPACT_HARNESS_PARALLEL")); err == nil && v > 0 {
			n = v
		}
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
	os.Exit(m.Run())
}

// harnessParallel is how many scenarios run at once by default.
const harnessParallel = 8

func TestImpactHarness(t *testing.T) {
	testenv.AgreementSuite(t)
	env := sandboxtest.Env(t)
	start := time.Now()
	h := &harness{c: testenv.SandboxClients(t, env), preemptions: map[string][]time.Time{}}
	t.Cleanup(func() {
		if os.Getenv("IMPACT_HARNESS_KEEP") != "" {
			t.Log("IMPACT_HARNESS_KEEP: the scenarios' objects stay")
			return
		}
		var wg sync.WaitGroup
		for _, f := range h.cleanups {
			wg.Go(f)
		}
		wg.Wait()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := h.c.Kueue.KueueV1beta2().ResourceFlavors().Apply(ctx, domain.FlavorFor(gpuFlavor),
		metav1.ApplyOptions{FieldManager: domain.FieldManager, Force: true}); err != nil {
		t.Fatal(err)
	}
	factory := kueueinformers.NewSharedInformerFactory(h.c.Kueue, 0)
	inf := factory.Kueue().V1beta2().Workloads()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: h.observe}); err != nil {
		t.Fatal(err)
	}
	h.workloads = inf.Lister()
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer %v never synced", typ)
		}
	}

	var (
		mu      sync.Mutex
		results []*scenarioResult
	)
	t.Run("scenarios", func(t *testing.T) {
		for _, sc := range scenarios() {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				r := h.run(t, sc)
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			})
		}
	})
	slices.SortFunc(results, func(a, b *scenarioResult) int { return cmp.Compare(a.order, b.order) })
	total, agreed := 0, 0
	for _, r := range results {
		total += r.compared
		agreed += r.agreed
		for _, d := range r.disagreements {
			t.Logf("disagreement: %s %s (%s): predicted %q, Kueue: %q %s", r.name, d.workload, d.job, d.predicted, d.actual, d.detail)
		}
	}
	if total == 0 {
		t.Fatal("no Workload compared")
	}
	pct := 100 * float64(agreed) / float64(total)
	wall := time.Since(start)
	t.Logf("impact harness: %d scenarios, %d Workloads compared, %d agree (%.1f %%), %d disagree; %d moved in Kueue; %d moved by the preview of the unchanged copies; wall time %s",
		len(results), total, agreed, pct, total-agreed, moved(results), baselineMoved(results), wall.Round(100*time.Millisecond))
	if path := os.Getenv("IMPACT_HARNESS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report(results, total, agreed, wall)), 0o644); err != nil {
			t.Error(err)
		}
	}
	if pct < agreementFloor {
		t.Errorf("the preview agrees with Kueue on %.1f %% of Workloads, below %.0f %%", pct, agreementFloor)
	}
}

// observe records a Workload's eviction by a preemption as the watch sees
// it, so that one Kueue evicts and admits again between two polls still
// counts.
func (h *harness) observe(oldObj, newObj any) {
	old, ok1 := oldObj.(*kueue.Workload)
	wl, ok2 := newObj.(*kueue.Workload)
	if !ok1 || !ok2 || !preemptedNow(wl) || preemptedNow(old) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	key := wl.Namespace + "/" + wl.Name
	h.preemptions[key] = append(h.preemptions[key], time.Now())
}

func preemptedNow(wl *kueue.Workload) bool {
	ev := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
	return apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadPreempted) ||
		(ev != nil && ev.Status == metav1.ConditionTrue && ev.Reason == kueue.WorkloadEvictedByPreemption)
}

// workloadNow is the Workload as the watch last saw it; nil when gone.
func (h *harness) workloadNow(ns, name string) *kueue.Workload {
	wl, err := h.workloads.Workloads(ns).Get(name)
	if err != nil {
		return nil
	}
	return wl
}

func (h *harness) preemptedSince(key string, since time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, at := range h.preemptions[key] {
		if !at.Before(since) {
			return true
		}
	}
	return false
}

// preemptionCount is how many times Kueue counts the Workload evicted by a
// preemption.
func preemptionCount(wl *kueue.Workload) int32 {
	var n int32
	if wl.Status.SchedulingStats != nil {
		for _, e := range wl.Status.SchedulingStats.Evictions {
			if e.Reason == kueue.WorkloadEvictedByPreemption {
				n += e.Count
			}
		}
	}
	return n
}

// scenarioResult is one scenario's comparison.
type scenarioResult struct {
	order                    int
	name, kind, what, cause  string
	teams                    int
	compared, agreed         int
	moved                    int // Workloads whose fate in Kueue was not "stays ..."
	baselineMoved            int // Workloads the preview moves in the unchanged copy
	disagreements            []disagreement
	setup, predict, observed time.Duration
	priorityFollowed         string // for class changes: whether Kueue rewrote spec.priority
	cycles                   [2]int // scheduling cycles of the preview: unchanged, changed
	takenIn                  time.Duration
}

type disagreement struct {
	workload, job, predicted, actual, detail string
}

func moved(rs []*scenarioResult) int {
	n := 0
	for _, r := range rs {
		n += r.moved
	}
	return n
}

// baselineMoved counts the Workloads the preview moves in the unchanged
// copies: Kueue had settled them, so any is a preview that does not
// reproduce Kueue's own state.
func baselineMoved(rs []*scenarioResult) int {
	n := 0
	for _, r := range rs {
		n += r.baselineMoved
	}
	return n
}

// env is one scenario's objects in the sandbox.
type env struct {
	h      *harness
	sc     scenario
	prefix string
	jobs   int
}

func (e *env) name(local string) string { return e.prefix + "-" + local }

// cohortName is the sandbox name of a scenario's cohort ("" is its default
// one).
func (e *env) cohortName(local string) string {
	if local == "" {
		local = "pool"
	}
	return e.name(local)
}

// namespace is the scenario's: every team's LocalQueue and Jobs are in it
// (Kueue decides by queue, not by namespace; one namespace a scenario
// spares the apiserver most of the work of deleting them).
func (e *env) namespace() string { return e.prefix }

// queue is a team's LocalQueue.
func queue(team string) string { return "lq-" + team }

func (h *harness) run(t *testing.T, sc scenario) *scenarioResult {
	ctx := context.Background()
	e := &env{h: h, sc: sc, prefix: "ih" + rand.String(4) + "-" + sc.name}
	r := &scenarioResult{order: sc.order, name: sc.name, kind: sc.kind, what: sc.what, cause: sc.cause, teams: len(sc.teams)}
	t0 := time.Now()
	e.setUp(t)
	steps := []string{fmt.Sprintf("objects %s", time.Since(t0).Round(100*time.Millisecond))}
	for i, wave := range sc.waves {
		ts := time.Now()
		for _, j := range wave {
			e.submit(t, j)
		}
		tw := time.Now()
		quiet := 1500 * time.Millisecond
		if i < len(sc.waves)-1 {
			quiet = time.Second
		}
		e.settle(t, e.jobs, "", quiet, time.Time{})
		steps = append(steps, fmt.Sprintf("wave %d: submit %s settle %s", i, tw.Sub(ts).Round(100*time.Millisecond), time.Since(tw).Round(100*time.Millisecond)))
	}
	r.setup = time.Since(t0)
	t.Logf("setup: %s", strings.Join(steps, ", "))

	// The preview: the live objects, the same with the change, Kueue's
	// scheduler over both.
	t1 := time.Now()
	live := readCluster(t, h.c, e.prefix, []string{e.namespace()})
	live.FairSharing = sandboxFairSharing
	proposed := e.propose(live)
	base, err := impact.Simulate(ctx, live)
	if err != nil {
		t.Fatalf("preview of the unchanged cluster: %v", err)
	}
	pred, err := impact.Simulate(ctx, proposed)
	if err != nil {
		t.Fatalf("preview of the change: %v", err)
	}
	r.predict = time.Since(t1)
	r.cycles = [2]int{base.Cycles, pred.Cycles}
	for _, o := range base.Workloads {
		if o.Fate != impact.StaysAdmitted && o.Fate != impact.StaysPending {
			r.baselineMoved++
		}
	}

	// The change, in the sandbox.
	before := map[string]*impact.Shape{}
	counts := map[string]int32{}
	jobOf := map[string]string{}
	for _, s := range live.Workloads {
		before[s.Key()] = s
	}
	wls, err := h.c.Kueue.KueueV1beta2().Workloads(e.namespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var uids []string // UID, job name: Kueue's messages name a preemptor by UID
	for i := range wls.Items {
		wl := &wls.Items[i]
		counts[wl.Namespace+"/"+wl.Name] = preemptionCount(wl)
		for _, o := range wl.OwnerReferences {
			jobOf[wl.Namespace+"/"+wl.Name] = o.Name
			uids = append(uids, string(wl.UID), o.Name)
		}
	}
	readable := strings.NewReplacer(uids...)
	t2 := time.Now()
	seen := e.apply(t)
	for deadline := time.Now().Add(time.Minute); !seen(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Kueue never took the change in")
		}
	}
	r.takenIn = time.Since(t2)
	gone := kueue.LocalQueueName("")
	if sc.change.deleteTeam != "" {
		gone = kueue.LocalQueueName(queue(sc.change.deleteTeam))
	}
	remaining := 0
	for _, s := range before {
		if s.Queue != gone {
			remaining++
		}
	}
	after := e.settle(t, remaining, gone, 2*time.Second, time.Now())
	r.observed = time.Since(t2)

	if sc.change.classes != nil {
		r.priorityFollowed = e.priorityFollowed(after)
	}
	actuals := map[string]string{}
	for key, s := range before {
		if s.Queue == gone {
			continue // the deleted team's
		}
		actual := e.fate(s, after[key], counts[key], t2)
		actuals[key] = actual
		if actual != string(impact.StaysAdmitted) && actual != string(impact.StaysPending) {
			r.moved++
		}
		p := pred.Workloads[key]
		predicted := "(none)"
		detail := ""
		if p != nil {
			predicted = string(p.Fate)
			detail = strings.TrimSpace(p.Reason + " " + p.Message)
		}
		r.compared++
		if predicted == actual {
			r.agreed++
			continue
		}
		if wl := after[key]; wl != nil {
			for _, c := range wl.Status.Conditions {
				if c.Type == kueue.WorkloadQuotaReserved || c.Type == kueue.WorkloadEvicted || c.Type == kueue.WorkloadPreempted {
					detail += fmt.Sprintf(" [Kueue %s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
				}
			}
		}
		r.disagreements = append(r.disagreements, disagreement{workload: key, job: jobOf[key], predicted: predicted, actual: actual, detail: readable.Replace(detail)})
	}
	if len(r.disagreements) > 0 {
		// The whole scenario, to read the disagreements in.
		var rows []string
		for key, s := range before {
			class, after := "", ""
			if s.PriorityClass != nil {
				class = strings.TrimPrefix(s.PriorityClass.Name, e.prefix+"-")
			}
			if wl := e.h.workloadNow(e.namespace(), s.Name); wl != nil {
				after = fmt.Sprint(ptr.Deref(wl.Spec.Priority, 0))
			}
			state := "pending"
			if s.Admitted() {
				state = "admitted"
			}
			p := ptr.Deref(pred.Workloads[key], impact.Outcome{Fate: "(none)"})
			rows = append(rows, fmt.Sprintf("%s %s %s/%d→%s %s: predicted %s, Kueue %s %s", jobOf[key], s.Queue, class, ptr.Deref(s.Priority, 0), after, state,
				p.Fate, cmp.Or(actuals[key], "(deleted)"), readable.Replace(p.Message)))
		}
		slices.Sort(rows)
		t.Logf("scenario %s:\n%s", sc.name, strings.Join(rows, "\n"))
	}
	t.Logf("%s (%s): %d teams, %d Workloads, %d agree, %d moved; baseline moved %d; setup %s, preview %s (%v cycles), Kueue took the change in %s, settled %s",
		sc.name, sc.what, r.teams, r.compared, r.agreed, r.moved, r.baselineMoved,
		r.setup.Round(100*time.Millisecond), r.predict.Round(time.Millisecond), r.cycles, r.takenIn.Round(100*time.Millisecond), r.observed.Round(100*time.Millisecond))
	return r
}

// fate is what Kueue did with a Workload since the change at t2.
func (e *env) fate(was *impact.Shape, now *kueue.Workload, count0 int32, t2 time.Time) string {
	if now == nil {
		return fateDeleted
	}
	key := now.Namespace + "/" + now.Name
	if preemptionCount(now) > count0 || e.h.preemptedSince(key, t2) {
		return string(impact.Preempted)
	}
	holds := now.Status.Admission != nil && apimeta.IsStatusConditionTrue(now.Status.Conditions, kueue.WorkloadQuotaReserved)
	switch {
	case was.Admitted() && holds:
		return string(impact.StaysAdmitted)
	case was.Admitted():
		if ev := apimeta.FindStatusCondition(now.Status.Conditions, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue {
			return fateEvicted + " (" + ev.Reason + ")"
		}
		return fateEvicted
	case holds:
		return string(impact.Admitted)
	}
	return string(impact.StaysPending)
}

// priorityFollowed says whether Kueue rewrote the spec.priority of the
// Workloads of a class whose value changed.
func (e *env) priorityFollowed(after map[string]*kueue.Workload) string {
	followed, stale := 0, 0
	for _, wl := range after {
		if wl.Spec.PriorityClassRef == nil {
			continue
		}
		for class, v := range e.sc.change.classes {
			if wl.Spec.PriorityClassRef.Name == e.name(class) {
				if wl.Spec.Priority != nil && *wl.Spec.Priority == v {
					followed++
				} else {
					stale++
				}
			}
		}
	}
	return fmt.Sprintf("%d of %d Workloads of the changed classes carry the new value", followed, followed+stale)
}

// settle waits until Kueue leaves the scenario's Workloads alone: want of
// them exist (none left in the LocalQueue gone, a deleted team's), none is
// evicted while it still holds quota, and nothing changed for quiet since
// since. It returns them by namespace/name.
func (e *env) settle(t *testing.T, want int, gone kueue.LocalQueueName, quiet time.Duration, since time.Time) map[string]*kueue.Workload {
	t.Helper()
	deadline := time.Now().Add(150 * time.Second)
	var last string
	stableSince := time.Now()
	for {
		wls := map[string]*kueue.Workload{}
		var sig []string
		ready, leftovers := true, 0
		list, err := e.h.workloads.Workloads(e.namespace()).List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		for _, wl := range list {
			if gone != "" && wl.Spec.QueueName == gone {
				leftovers++
				continue
			}
			wls[wl.Namespace+"/"+wl.Name] = wl
			qr := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
			ev := apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted)
			// A Workload without Kueue's pending condition is pending too:
			// Kueue sets it on the Workloads it tries, and moves those
			// equivalent to one that did not fit aside untried
			// (SchedulingEquivalenceHashing).
			if ev && qr != nil && qr.Status == metav1.ConditionTrue {
				ready = false
			}
			state := "-"
			if qr != nil {
				state = string(qr.Status)
			}
			sig = append(sig, fmt.Sprintf("%s:%s:%v:%d", wl.Name, state, ev, preemptionCount(wl)))
		}
		slices.Sort(sig)
		s := strings.Join(sig, ",")
		if s != last {
			last, stableSince = s, time.Now()
			if os.Getenv("IMPACT_HARNESS_TRACE") != "" {
				t.Logf("%s ready=%v %s", time.Now().Format("15:04:05.000"), ready, s)
			}
		}
		if ready && leftovers == 0 && len(wls) == want && time.Since(stableSince) >= quiet && time.Since(since) >= quiet {
			return wls
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kueue never settled: %d of %d Workloads, %d of the deleted team's left, ready %v:\n%s", len(wls), want, leftovers, ready, strings.ReplaceAll(s, ",", "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readCluster reads the live objects of a scenario into the preview's copy:
// its ClusterQueues and Cohorts (labelled with the scenario), the cohorts
// the queues name and the cohorts' parents, the flavors their quotas are on,
// its namespaces, their LocalQueues and Workloads.
func readCluster(t *testing.T, c testenv.Clients, scenario string, namespaces []string) impact.Cluster {
	t.Helper()
	ctx := context.Background()
	kq := c.Kueue.KueueV1beta2()
	var out impact.Cluster
	cqs, err := kq.ClusterQueues().List(ctx, metav1.ListOptions{LabelSelector: scenarioLabel + "=" + scenario})
	if err != nil {
		t.Fatal(err)
	}
	flavors := map[kueue.ResourceFlavorReference]bool{}
	cohorts := map[kueue.CohortReference]bool{}
	// The scenario's Cohort objects, those no ClusterQueue names (yet) too:
	// a change may put a cohort under one of them.
	var pending []kueue.CohortReference
	cos, err := kq.Cohorts().List(ctx, metav1.ListOptions{LabelSelector: scenarioLabel + "=" + scenario})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cos.Items {
		pending = append(pending, kueue.CohortReference(cos.Items[i].Name))
	}
	for i := range cqs.Items {
		cq := &cqs.Items[i]
		out.ClusterQueues = append(out.ClusterQueues, cq)
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				flavors[f.Name] = true
			}
		}
		pending = append(pending, cq.Spec.CohortName)
	}
	for len(pending) > 0 {
		name := pending[0]
		pending = pending[1:]
		if name == "" || cohorts[name] {
			continue
		}
		cohorts[name] = true
		co, err := kq.Cohorts().Get(ctx, string(name), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // implicit: a name ClusterQueues share
		}
		if err != nil {
			t.Fatal(err)
		}
		out.Cohorts = append(out.Cohorts, co)
		pending = append(pending, co.Spec.ParentName)
		for _, rg := range co.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				flavors[f.Name] = true
			}
		}
	}
	for name := range flavors {
		rf, err := kq.ResourceFlavors().Get(ctx, string(name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out.Flavors = append(out.Flavors, rf)
	}
	for _, ns := range namespaces {
		obj, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out.Namespaces = append(out.Namespaces, obj)
		lqs, err := kq.LocalQueues(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range lqs.Items {
			out.LocalQueues = append(out.LocalQueues, &lqs.Items[i])
		}
		wls, err := kq.Workloads(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range wls.Items {
			if s := impact.ShapeOf(&wls.Items[i]); s != nil {
				out.Workloads = append(out.Workloads, s)
			}
		}
	}
	return out
}

// setUp creates the scenario's priority classes, cohorts, teams (a
// namespace, a ClusterQueue and a LocalQueue each); all go when the test
// ends.
func (e *env) setUp(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c := e.h.c
	kq := c.Kueue.KueueV1beta2()
	for _, class := range slices.Sorted(maps.Keys(e.sc.classes)) {
		testenv.PriorityClass(t, c.Kueue, e.name(class), e.sc.classes[class])
	}
	for _, co := range e.sc.cohorts {
		obj := &kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: e.cohortName(co.name), Labels: map[string]string{scenarioLabel: e.prefix}}}
		if co.parent != "" {
			obj.Spec.ParentName = kueue.CohortReference(e.cohortName(co.parent))
		}
		if co.gpus > 0 {
			obj.Spec.ResourceGroups = []kueue.ResourceGroup{quota(co.gpus, nil, nil)}
		}
		if _, err := kq.Cohorts().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.h.cleanup(func() { _ = kq.Cohorts().Delete(context.Background(), obj.Name, metav1.DeleteOptions{}) })
	}
	ns := e.namespace()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{scenarioLabel: e.prefix}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.h.cleanup(func() { _ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	// Admitted Jobs start no pods: Kueue (without waitForPodsReady, as the
	// sandbox runs it) decides on quota alone, and a preempted Job stops at
	// once instead of waiting for its pods to leave the KWOK nodes, which
	// on a busy machine took up to a minute and a half.
	if _, err := c.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tm := range e.sc.teams {
		cq := e.clusterQueue(tm)
		if _, err := kq.ClusterQueues().Create(ctx, cq, metav1.CreateOptions{}); err != nil {
			t.Fatalf("ClusterQueue %s: %v", cq.Name, err)
		}
		e.h.cleanup(func() { _ = kq.ClusterQueues().Delete(context.Background(), cq.Name, metav1.DeleteOptions{}) })
		lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: queue(tm.name), Namespace: ns},
			Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cq.Name)}}
		if _, err := kq.LocalQueues(ns).Create(ctx, lq, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// clusterQueue is a team's ClusterQueue as Kueue's docs and the console
// write them: GPUs, vCPU and memory on the GPU flavor, preemption
// reclaimWithinCohort Any, borrowWithinCohort and withinClusterQueue
// LowerPriority unless the team says otherwise.
func (e *env) clusterQueue(tm team) *kueue.ClusterQueue {
	p := &kueue.ClusterQueuePreemption{
		ReclaimWithinCohort: cmp.Or(tm.reclaim, kueue.PreemptionPolicyAny),
		WithinClusterQueue:  cmp.Or(tm.within, kueue.PreemptionPolicyLowerPriority),
		BorrowWithinCohort: &kueue.BorrowWithinCohort{Policy: cmp.Or(tm.borrowWithin, kueue.BorrowWithinCohortPolicyLowerPriority),
			MaxPriorityThreshold: tm.threshold},
	}
	if p.BorrowWithinCohort.Policy == kueue.BorrowWithinCohortPolicyNever {
		p.BorrowWithinCohort.MaxPriorityThreshold = nil
	}
	cq := &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: e.name(tm.name), Labels: map[string]string{scenarioLabel: e.prefix}},
		Spec: kueue.ClusterQueueSpec{
			CohortName:        kueue.CohortReference(e.cohortName(tm.cohort)),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: e.namespace()}},
			QueueingStrategy:  kueue.BestEffortFIFO,
			Preemption:        p,
			ResourceGroups:    []kueue.ResourceGroup{quota(tm.gpus, tm.lend, tm.borrow)},
		},
	}
	if tm.weight != "" {
		cq.Spec.FairSharing = &kueue.FairSharing{Weight: ptr.To(resource.MustParse(tm.weight))}
	}
	return cq
}

// quota is gpus GPUs (with limits) on the GPU flavor, and vCPU and memory
// enough for every job the scenarios submit.
func quota(gpus int64, lend, borrow *int64) kueue.ResourceGroup {
	g := kueue.ResourceQuota{Name: sandbox.ResourceGPU, NominalQuota: *resource.NewQuantity(gpus, resource.DecimalSI)}
	if lend != nil {
		g.LendingLimit = resource.NewQuantity(*lend, resource.DecimalSI)
	}
	if borrow != nil {
		g.BorrowingLimit = resource.NewQuantity(*borrow, resource.DecimalSI)
	}
	return kueue.ResourceGroup{
		CoveredResources: []corev1.ResourceName{sandbox.ResourceGPU, corev1.ResourceCPU, corev1.ResourceMemory},
		Flavors: []kueue.FlavorQuotas{{Name: gpuFlavor, Resources: []kueue.ResourceQuota{g,
			{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("64")},
			{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("256Gi")},
		}}},
	}
}

func (e *env) submit(t *testing.T, j job) *batchv1.Job {
	t.Helper()
	e.jobs++
	class := ""
	if j.class != "" {
		class = e.name(j.class)
	}
	return testenv.Submit(t, e.h.c.Kube, testenv.Job{Namespace: e.namespace(), LocalQueue: queue(j.team),
		Name: fmt.Sprintf("j%02d-%s", e.jobs, j.team), Class: class, GPUs: j.gpus})
}

// propose is the copy with the change: the same objects, changed as apply
// changes the sandbox's.
func (e *env) propose(live impact.Cluster) impact.Cluster {
	ch := e.sc.change
	out := live
	out.ClusterQueues = nil
	for _, cq := range live.ClusterQueues {
		cq = cq.DeepCopy()
		for team, f := range ch.cq {
			if cq.Name == e.name(team) {
				f(cq)
			}
		}
		switch cq.Name {
		case e.name(ch.deleteTeam):
			continue // its LocalQueue and Workloads go too (below)
		case e.name(ch.deleteCQ):
			// Deleted while Workloads hold its quota: the apiserver keeps it,
			// terminating, until Kueue's finalizer goes.
			cq.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		out.ClusterQueues = append(out.ClusterQueues, cq)
	}
	out.Cohorts = nil
	for _, co := range live.Cohorts {
		co = co.DeepCopy()
		for local, parent := range ch.parents {
			if co.Name == e.cohortName(local) {
				co.Spec.ParentName = kueue.CohortReference(e.cohortName(parent))
			}
		}
		out.Cohorts = append(out.Cohorts, co)
	}
	gone := ""
	if ch.deleteTeam != "" {
		gone = queue(ch.deleteTeam)
	}
	out.LocalQueues = slices.DeleteFunc(slices.Clone(live.LocalQueues), func(lq *kueue.LocalQueue) bool { return lq.Name == gone })
	out.Workloads = nil
	for _, s := range live.Workloads {
		if string(s.Queue) == gone {
			continue
		}
		c := *s
		if c.PriorityClass != nil {
			for class, v := range ch.classes {
				if c.PriorityClass.Name == e.name(class) {
					// Kueue's WorkloadPriorityClass controller rewrites the
					// priority of every Workload of a class whose value changes.
					c.Priority = ptr.To(v)
				}
			}
		}
		out.Workloads = append(out.Workloads, &c)
	}
	return out
}

// apply makes the change in the sandbox, and returns a test of whether
// Kueue has taken it in (its caches and queues), when the objects tell:
// Kueue stamps a ClusterQueue's Active condition with the generation it
// read, terminates a deleted one, and rewrites the priority of a class's
// Workloads. A cohort's move leaves no trace; only the quiet time covers it.
func (e *env) apply(t *testing.T) func() bool {
	t.Helper()
	ctx := context.Background()
	ch := e.sc.change
	kq := e.h.c.Kueue.KueueV1beta2()
	var seen []func() bool
	for _, team := range slices.Sorted(maps.Keys(ch.cq)) {
		var gen int64
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cq, err := kq.ClusterQueues().Get(ctx, e.name(team), metav1.GetOptions{})
			if err != nil {
				return err
			}
			ch.cq[team](cq)
			cq, err = kq.ClusterQueues().Update(ctx, cq, metav1.UpdateOptions{})
			if err == nil {
				gen = cq.Generation
			}
			return err
		})
		if err != nil {
			t.Fatalf("changing ClusterQueue %s: %v", e.name(team), err)
		}
		seen = append(seen, func() bool {
			cq, err := kq.ClusterQueues().Get(ctx, e.name(team), metav1.GetOptions{})
			c := apimeta.FindStatusCondition(cq.Status.Conditions, kueue.ClusterQueueActive)
			return err == nil && c != nil && c.ObservedGeneration >= gen
		})
	}
	for _, local := range slices.Sorted(maps.Keys(ch.parents)) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			co, err := kq.Cohorts().Get(ctx, e.cohortName(local), metav1.GetOptions{})
			if err != nil {
				return err
			}
			co.Spec.ParentName = kueue.CohortReference(e.cohortName(ch.parents[local]))
			_, err = kq.Cohorts().Update(ctx, co, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("moving cohort %s: %v", local, err)
		}
	}
	// Classes in the order the console writes a policy's: by ranking weight,
	// highest first, so by the new value and, where new values tie (first
	// come first served), by the old one (IMPACT_HARNESS_CLASS_ORDER=ascending:
	// the other way round, to compare).
	old := e.sc.classes
	classes := slices.SortedFunc(maps.Keys(ch.classes), func(a, b string) int {
		return cmp.Or(cmp.Compare(ch.classes[b], ch.classes[a]), cmp.Compare(old[b], old[a]), cmp.Compare(a, b))
	})
	if os.Getenv("IMPACT_HARNESS_CLASS_ORDER") == "ascending" {
		slices.Reverse(classes)
	}
	for _, class := range classes {
		v := ch.classes[class]
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			wpc, err := kq.WorkloadPriorityClasses().Get(ctx, e.name(class), metav1.GetOptions{})
			if err != nil {
				return err
			}
			wpc.Value = v
			_, err = kq.WorkloadPriorityClasses().Update(ctx, wpc, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("changing priority class %s: %v", class, err)
		}
		seen = append(seen, func() bool {
			wls, err := e.h.workloads.Workloads(e.namespace()).List(labels.Everything())
			if err != nil {
				return false
			}
			for _, wl := range wls {
				if ref := wl.Spec.PriorityClassRef; ref != nil && ref.Name == e.name(class) && ptr.Deref(wl.Spec.Priority, -1) != v {
					return false
				}
			}
			return true
		})
	}
	if ch.deleteCQ != "" {
		if err := kq.ClusterQueues().Delete(ctx, e.name(ch.deleteCQ), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, func() bool {
			cq, err := kq.ClusterQueues().Get(ctx, e.name(ch.deleteCQ), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true
			}
			c := apimeta.FindStatusCondition(cq.Status.Conditions, kueue.ClusterQueueActive)
			return err == nil && c != nil && c.Reason == kueue.ClusterQueueActiveReasonTerminating
		})
	}
	if team := ch.deleteTeam; team != "" {
		// What the console's DeleteTeam does: the LocalQueue, the
		// ClusterQueue, the team's namespace, so its Jobs and their
		// Workloads (here the team's Jobs, in the scenario's namespace).
		// With jobsFirst, the Jobs go first and the queues once Kueue has
		// let go of their Workloads.
		bg := metav1.DeletePropagationBackground
		opts := metav1.DeleteOptions{PropagationPolicy: &bg}
		queues := func() {
			if err := kq.LocalQueues(e.namespace()).Delete(ctx, queue(team), opts); err != nil {
				t.Fatal(err)
			}
			if err := kq.ClusterQueues().Delete(ctx, e.name(team), opts); err != nil {
				t.Fatal(err)
			}
		}
		if !ch.jobsFirst {
			queues()
		}
		if err := e.h.c.Kube.BatchV1().Jobs(e.namespace()).DeleteCollection(ctx, opts,
			metav1.ListOptions{LabelSelector: "kueue.x-k8s.io/queue-name=" + queue(team)}); err != nil {
			t.Fatal(err)
		}
		if ch.jobsFirst {
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
				wls, err := e.h.workloads.Workloads(e.namespace()).List(labels.Everything())
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(wls, func(wl *kueue.Workload) bool { return wl.Spec.QueueName == kueue.LocalQueueName(queue(team)) }) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the Workloads of team %s never went", team)
				}
			}
			queues()
		}
		seen = append(seen, func() bool {
			_, err := kq.ClusterQueues().Get(ctx, e.name(team), metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	}
	return func() bool {
		for _, f := range seen {
			if !f() {
				return false
			}
		}
		return true
	}
}

// report is the Markdown table of the figures.
func report(rs []*scenarioResult, total, agreed int, wall time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d scenarios, %d Workloads compared, %d agree (%.1f %%), %d disagree; %d Workloads moved in Kueue (preempted or admitted); "+
		"the preview of the unchanged copies moved %d; harness wall time %s.\n\n",
		len(rs), total, agreed, 100*float64(agreed)/float64(max(total, 1)), total-agreed, moved(rs), baselineMoved(rs), wall.Round(time.Second))
	b.WriteString("| scenario | change | teams | Workloads | moved | agreed | disagreements |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		var ds []string
		for _, d := range r.disagreements {
			ds = append(ds, fmt.Sprintf("%s: predicted %s, Kueue %s", d.job, d.predicted, d.actual))
		}
		if len(ds) > 0 {
			ds[len(ds)-1] += ". Cause: " + cmp.Or(r.cause, "not known yet")
		}
		what := r.what
		if r.priorityFollowed != "" {
			what += " (" + r.priorityFollowed + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %s |\n", r.name, what, r.teams, r.compared, r.moved, r.agreed, strings.Join(ds, "; "))
	}
	return b.String()
}
