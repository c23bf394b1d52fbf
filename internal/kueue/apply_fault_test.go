package kueue_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// faultMode is how the apiserver fails at the request it goes down on.
type faultMode int

const (
	// refuse: the request never reaches the apiserver (503).
	refuse faultMode = iota
	// dropAfterForward: the apiserver does the work, then the connection
	// dies before the answer reaches the console.
	dropAfterForward
)

func (m faultMode) String() string {
	if m == refuse {
		return "refused"
	}
	return "dropped"
}

// flakyAPIServer is a TLS reverse proxy to the sandbox's apiserver that goes
// down at a chosen request, as when the apiserver restarts: that request
// fails as the mode says, every later one gets 503, until reset.
type flakyAPIServer struct {
	srv       *httptest.Server
	proxy     *httputil.ReverseProxy
	target    *url.URL
	transport *http.Transport

	mu       sync.Mutex
	downFrom int // request number from which the apiserver is down; 0: never
	mode     faultMode
	log      []string
	fiveXX   int // 503 answers
	dropped  int // connections closed without an answer
	writes   int // writes (not dry runs) that reached the apiserver
	dryRuns  int
}

func newFlakyAPIServer(t *testing.T) *flakyAPIServer {
	t.Helper()
	target, err := url.Parse(sandboxtest.Env(t).APIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	f := &flakyAPIServer{target: target,
		transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test
	f.proxy = httputil.NewSingleHostReverseProxy(target)
	f.proxy.Transport = f.transport
	f.srv = httptest.NewTLSServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

// applier is an Applier whose requests go through the proxy.
func (f *flakyAPIServer) applier(t *testing.T) kueue.Applier {
	t.Helper()
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host = f.srv.URL
	cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true}
	return kueue.Applier{Kube: kubernetes.NewForConfigOrDie(cfg), Kueue: kueueclient.NewForConfigOrDie(cfg)}
}

// reset makes the apiserver go down at request number downFrom (0: never)
// and clears the counters.
func (f *flakyAPIServer) reset(downFrom int, mode faultMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.downFrom, f.mode, f.log, f.fiveXX, f.dropped, f.writes, f.dryRuns = downFrom, mode, nil, 0, 0, 0, 0
	f.srv.CloseClientConnections()
}

func (f *flakyAPIServer) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func (f *flakyAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	dryRun := r.URL.Query().Get("dryRun") != ""
	f.mu.Lock()
	f.log = append(f.log, r.Method+" "+r.URL.Path)
	n := len(f.log)
	down := f.downFrom > 0 && n >= f.downFrom
	forward := !down || n == f.downFrom && f.mode == dropAfterForward
	if forward && write {
		if dryRun {
			f.dryRuns++
		} else {
			f.writes++
		}
	}
	switch {
	case !down:
	case forward:
		f.dropped++
	default:
		f.fiveXX++
	}
	f.mu.Unlock()

	switch {
	case !down:
		f.proxy.ServeHTTP(w, r)
	case forward:
		out := r.Clone(context.WithoutCancel(r.Context()))
		out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = f.target.Scheme, f.target.Host, f.target.Host, ""
		if resp, err := f.transport.RoundTrip(out); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	default:
		http.Error(w, "the apiserver is restarting", http.StatusServiceUnavailable)
	}
}

// built are the objects the console builds for team, as BuildTeam does.
func built(t *testing.T, s domain.Settings, team domain.Team) domain.TeamObjects {
	t.Helper()
	objs, err := domain.BuildTeam(s, team, domain.LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func faultTeam(name string) domain.Team {
	return domain.Team{Name: name, Enabled: true, FairShareWeight: 5, Preemption: domain.PreemptLowerPriority,
		Lending: domain.LendAndBorrow, BorrowLimitPercent: 50,
		Members: []domain.Member{{Kind: "User", Name: "dev"}, {Kind: "Group", Name: "ml"}},
		Quota:   []domain.QuotaInput{{InstanceType: "ml.g6.12xlarge", GPUs: ptr.To[int64](2)}}}
}

// teamParts says which of a team's five parts exist: namespace, ClusterQueue,
// LocalQueue, member RoleBinding, history.
func teamParts(t *testing.T, c testClients, s domain.Settings, team string) []string {
	t.Helper()
	ctx := context.Background()
	var have []string
	check := func(name string, err error) {
		switch {
		case err == nil:
			have = append(have, name)
		case !apierrors.IsNotFound(err):
			t.Fatalf("reading %s of %s: %v", name, team, err)
		}
	}
	_, err := c.Kube.CoreV1().Namespaces().Get(ctx, s.Namespace(team), metav1.GetOptions{})
	check("Namespace", err)
	_, err = c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue(team), metav1.GetOptions{})
	check("ClusterQueue", err)
	_, err = c.Kueue.KueueV1beta2().LocalQueues(s.Namespace(team)).Get(ctx, s.LocalQueue(team), metav1.GetOptions{})
	check("LocalQueue", err)
	_, err = c.Kube.RbacV1().RoleBindings(s.Namespace(team)).Get(ctx, domain.TeamMemberRole, metav1.GetOptions{})
	check("RoleBinding", err)
	_, err = c.Kube.CoreV1().ConfigMaps(s.State()).Get(ctx, domain.TeamRevisionsName(s, team), metav1.GetOptions{})
	check("history", err)
	return have
}

// convergence lists how a team's objects differ from what BuildTeam says:
// nothing when the apply is complete.
func convergence(t *testing.T, c testClients, s domain.Settings, team domain.Team, objs domain.TeamObjects, user string) []string {
	t.Helper()
	ctx := context.Background()
	var problems []string
	live := domain.LiveTeamObjects{Flavors: map[string]*kueuev1beta2.ResourceFlavor{}}
	audited := func(kind string, m metav1.Object) {
		if a := auditOf(m); a.createdBy != user || a.changedBy != user || a.createdAt == "" || a.changedAt == "" {
			problems = append(problems, fmt.Sprintf("%s audit %+v", kind, a))
		}
	}
	ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, s.Namespace(team.Name), metav1.GetOptions{})
	if err != nil {
		problems = append(problems, "namespace: "+err.Error())
	} else {
		if ns.Labels[domain.TeamLabel] != team.Name || ns.Labels[domain.ManagedByLabel] != domain.ManagedByValue {
			problems = append(problems, fmt.Sprintf("namespace labels %v", ns.Labels))
		}
		audited("Namespace", ns)
	}
	if cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue(team.Name), metav1.GetOptions{}); err == nil {
		live.ClusterQueue = cq
		audited("ClusterQueue", cq)
		onQueue := team // the annotation names no members: the revision does
		onQueue.Members = nil
		if got, ok := domain.TeamFromClusterQueue(cq); !ok || !cmp.Equal(got, onQueue) {
			problems = append(problems, fmt.Sprintf("stored allocation %+v", got))
		}
	}
	if lq, err := c.Kueue.KueueV1beta2().LocalQueues(s.Namespace(team.Name)).Get(ctx, s.LocalQueue(team.Name), metav1.GetOptions{}); err == nil {
		live.LocalQueue = lq
		audited("LocalQueue", lq)
	}
	for _, rf := range objs.Flavors {
		if got, err := c.Kueue.KueueV1beta2().ResourceFlavors().Get(ctx, *rf.Name, metav1.GetOptions{}); err == nil {
			live.Flavors[*rf.Name] = got
		}
	}
	drift, err := domain.DriftOf(objs, live)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range drift {
		problems = append(problems, d.String())
	}
	rb, err := c.Kube.RbacV1().RoleBindings(s.Namespace(team.Name)).Get(ctx, domain.TeamMemberRole, metav1.GetOptions{})
	if err != nil {
		problems = append(problems, "role binding: "+err.Error())
	} else {
		var subjects []string
		for _, sub := range rb.Subjects {
			subjects = append(subjects, sub.Kind+" "+sub.Name)
		}
		if diff := cmp.Diff([]string{"User dev", "Group ml"}, subjects); diff != "" || rb.RoleRef.Name != domain.TeamMemberRole {
			problems = append(problems, "role binding subjects: "+diff)
		}
		audited("RoleBinding", rb)
	}
	hist, err := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}.TeamRevisions(ctx, s, team.Name)
	switch {
	case err != nil:
		problems = append(problems, "history: "+err.Error())
	case len(hist) != 1 || hist[0].Action != domain.ActionCreate || hist[0].By != user || !cmp.Equal(hist[0].Allocation, team):
		problems = append(problems, fmt.Sprintf("history %+v", hist))
	}
	return problems
}

// The apiserver goes down in the middle of creating a team — at each of the
// requests one apply makes in turn, either refusing the request (503) or
// after doing it but before answering. The first attempt fails; applying the
// same objects again through a healthy connection converges: every object
// exactly as BuildTeam says, one revision, nothing half-made.
func TestApplyTeamConvergesAfterTheAPIServerFailsMidway(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	flaky := newFlakyAPIServer(t)
	faulty := flaky.applier(t)
	healthy := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}
	ctx := as("alice")

	// A clean create through the proxy shows the requests one apply makes.
	probe := faultTeam("probe")
	objs := built(t, s, probe)
	cleanupTeam(t, healthy, s, probe.Name)
	flaky.reset(0, refuse)
	if err := faulty.ApplyTeam(ctx, objs); err != nil {
		t.Fatalf("apply through the healthy proxy: %v", err)
	}
	sequence := flaky.requests()
	t.Logf("creating a team takes %d requests:\n  %s", len(sequence), strings.Join(sequence, "\n  "))

	type outcome struct {
		mode                      faultMode
		at                        int
		request                   string
		failed                    bool
		attempts                  int
		partsAfterFailure         []string
		fiveXX, dropped, problems int
		events                    int
	}
	var outcomes []outcome
	for _, mode := range []faultMode{refuse, dropAfterForward} {
		for at := 1; at <= len(sequence); at++ {
			team := faultTeam(fmt.Sprintf("%s-%d", mode, at))
			objs := built(t, s, team)
			cleanupTeam(t, healthy, s, team.Name)
			o := outcome{mode: mode, at: at, attempts: 1}

			flaky.reset(at, mode)
			err := faulty.ApplyTeam(ctx, objs)
			o.failed = err != nil
			flaky.mu.Lock()
			o.fiveXX, o.dropped = flaky.fiveXX, flaky.dropped
			flaky.mu.Unlock()
			o.partsAfterFailure = teamParts(t, c, s, team.Name)
			// The sequence can be a request shorter than the probe's when a
			// shared object (flavor, ClusterRole) needs no write this time.
			// Events are best effort: an apiserver down only for the Event
			// does not fail the change, which is applied and recorded.
			o.request = "(the apply was done before the apiserver went down)"
			if log := flaky.requests(); len(log) >= at {
				o.request = log[at-1]
			}
			wantErr := strings.Contains(o.request, "/") && !strings.HasSuffix(o.request, "/events")
			if o.failed != wantErr {
				t.Errorf("%s at request %d (%s): ApplyTeam error = %v", mode, at, o.request, err)
			}
			for o.failed && o.attempts < 3 {
				o.attempts++
				err = healthy.ApplyTeam(ctx, objs)
				o.failed = err != nil
			}
			if o.failed {
				t.Errorf("%s at request %d: the retry failed too: %v", mode, at, err)
			}
			problems := convergence(t, c, s, team, objs, "alice")
			o.problems = len(problems)
			for _, p := range problems {
				t.Errorf("%s at request %d (%s), after the retry: %s", mode, at, o.request, p)
			}
			for _, ev := range events(t, c, s.ClusterQueue(team.Name)) {
				if ev.Reason == domain.ReasonTeamCreated {
					o.events++
				}
			}
			if o.events > 1 {
				t.Errorf("%s at request %d: %d TeamCreated events", mode, at, o.events)
			}
			outcomes = append(outcomes, o)
		}
	}

	var report strings.Builder
	halfMade, totalAttempts, totalFiveXX, totalDropped, left, lostEvents := 0, 0, 0, 0, 0, 0
	for _, o := range outcomes {
		if n := len(o.partsAfterFailure); n > 0 && n < 5 {
			halfMade++
		}
		totalAttempts += o.attempts
		totalFiveXX += o.fiveXX
		totalDropped += o.dropped
		left += o.problems
		if o.events == 0 {
			lostEvents++
		}
		fmt.Fprintf(&report, "  %-7s at %2d %-72s attempts %d, 503s %d, dropped %d, after the failure: %v\n",
			o.mode, o.at, o.request, o.attempts, o.fiveXX, o.dropped, o.partsAfterFailure)
	}
	t.Logf("%d failure points: %d attempts in all, %d 503 answers, %d connections dropped after the apiserver did the work; "+
		"%d teams half-made by the failure, %d half-made after the retry; %d creates whose Event was lost (best effort)\n%s",
		len(outcomes), totalAttempts, totalFiveXX, totalDropped, halfMade, left, lostEvents, report.String())
}

// A Kueue webhook rejection during CheckTeam (the dry run) writes nothing:
// no namespace, queue, binding, history or Event.
func TestWebhookRejectionInCheckTeamWritesNothing(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	flaky := newFlakyAPIServer(t)
	a := flaky.applier(t)
	team := faultTeam("rejected")
	team.Quota[0].GPUs = ptr.To[int64](-1) // past the form, Kueue's webhook refuses it
	objs := built(t, s, team)
	flaky.reset(0, refuse)
	err := a.CheckTeam(as("alice"), objs)
	if err == nil {
		t.Fatal("CheckTeam accepted a negative quota")
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "nominalQuota") {
		t.Errorf("rejection: %v", err)
	}
	flaky.mu.Lock()
	writes, dryRuns := flaky.writes, flaky.dryRuns
	flaky.mu.Unlock()
	parts := teamParts(t, c, s, team.Name)
	evs := events(t, c, s.ClusterQueue(team.Name))
	t.Logf("rejected by Kueue: %d dry-run requests, %d writes, %d of 5 team parts exist, %d events", dryRuns, writes, len(parts), len(evs))
	if writes != 0 || len(parts) != 0 || len(evs) != 0 {
		t.Errorf("a rejected allocation left %d writes, parts %v, %d events", writes, parts, len(evs))
	}
}

// A team's LocalQueue pointed at another ClusterQueue by hand cannot be
// pointed back (Kueue keeps it immutable): the dry run says so before the
// save writes anything, so the team's queue is not changed either.
func TestALocalQueuePointedElsewhereIsRefusedBeforeAnyWrite(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	ctx := as("alice")
	healthy := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}
	team := faultTeam("repointed")
	objs := built(t, s, team)
	cleanupTeam(t, healthy, s, team.Name)
	if err := healthy.ApplyTeam(ctx, objs); err != nil {
		t.Fatal(err)
	}
	lqs := c.Kueue.KueueV1beta2().LocalQueues(s.Namespace(team.Name))
	if err := lqs.Delete(ctx, s.LocalQueue(team.Name), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	elsewhere := &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: s.LocalQueue(team.Name), Namespace: s.Namespace(team.Name)},
		Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: "somewhere-else"}}
	if _, err := lqs.Create(ctx, elsewhere, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue(team.Name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	team.FairShareWeight = 9
	objs = built(t, s, team)
	if err := healthy.CheckTeam(ctx, objs); err == nil || !strings.Contains(err.Error(), "local queue") {
		t.Fatalf("the dry run of a save over a LocalQueue pointed elsewhere: %v", err)
	}
	after, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue(team.Name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(after.Spec, before.Spec) {
		t.Errorf("the dry run changed the team's ClusterQueue")
	}
}

// The apiserver goes down in the middle of deleting a team, at each of the
// requests the delete makes. Whatever went, the team's ClusterQueue, by
// which the console knows the team, goes last: while anything of the team
// is left, its queue is too, so the team is still there to delete again,
// and the retry finishes the job. A failure after a write says so.
func TestDeleteTeamCanBeRetriedAfterTheAPIServerFailsMidway(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	flaky := newFlakyAPIServer(t)
	faulty := flaky.applier(t)
	healthy := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}
	ctx := as("alice")
	// gone lists what is left of a team, but what is being deleted: a
	// terminating namespace and what is in it, a ClusterQueue Kueue's
	// finalizer holds until its tasks are gone.
	gone := func(team string) []string {
		ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, s.Namespace(team), metav1.GetOptions{})
		terminating := err == nil && ns.DeletionTimestamp != nil
		var left []string
		for _, part := range teamParts(t, c, s, team) {
			switch part {
			case "Namespace", "LocalQueue", "RoleBinding":
				if terminating {
					continue
				}
			case "ClusterQueue":
				cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue(team), metav1.GetOptions{})
				if apierrors.IsNotFound(err) || err == nil && cq.DeletionTimestamp != nil {
					continue
				}
			}
			left = append(left, part)
		}
		return left
	}

	probe := faultTeam("del-probe")
	objs := built(t, s, probe)
	if err := healthy.ApplyTeam(ctx, objs); err != nil {
		t.Fatal(err)
	}
	flaky.reset(0, refuse)
	if err := faulty.DeleteTeam(ctx, s, probe.Name); err != nil {
		t.Fatalf("delete through the healthy proxy: %v", err)
	}
	sequence := flaky.requests()
	for _, mode := range []faultMode{refuse, dropAfterForward} {
		for at := 1; at <= len(sequence); at++ {
			team := faultTeam(fmt.Sprintf("del-%s-%d", mode, at))
			objs := built(t, s, team)
			cleanupTeam(t, healthy, s, team.Name)
			if err := healthy.ApplyTeam(ctx, objs); err != nil {
				t.Fatal(err)
			}
			flaky.reset(at, mode)
			err := faulty.DeleteTeam(ctx, s, team.Name)
			if err == nil {
				t.Errorf("%s at request %d (%s): the delete did not fail", mode, at, sequence[at-1])
				continue
			}
			var pw *kueue.PartlyWritten
			if at > 1 && !errors.As(err, &pw) {
				t.Errorf("%s at request %d (%s): after a write, the error does not say it went partway: %v", mode, at, sequence[at-1], err)
			}
			left := gone(team.Name)
			if len(left) > 0 && !slices.Contains(left, "ClusterQueue") {
				t.Errorf("%s at request %d (%s): %v left without the ClusterQueue: the team cannot be found to delete again", mode, at, sequence[at-1], left)
			}
			if err := healthy.DeleteTeam(ctx, s, team.Name); err != nil {
				t.Errorf("%s at request %d: the retry failed: %v", mode, at, err)
			}
			if left := gone(team.Name); len(left) > 0 {
				t.Errorf("%s at request %d: after the retry %v is left", mode, at, left)
			}
		}
	}
}
