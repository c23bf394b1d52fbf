package handlers_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
)

// The what-if page asks with a GET (it changes nothing) and answers on the
// page, and as JSON with format=json.

const whatIfJob = "/whatif?team=team-001&class=training&row.0.instanceType=ml.p5.48xlarge&row.0.pods=2&row.0.gpus=8"

// whatIfJSON is the JSON answer as a script reads it.
type whatIfJSON struct {
	Admitted       bool   `json:"admitted"`
	Borrowing      bool   `json:"borrowing"`
	Position       int    `json:"position"`
	EstimatedStart string `json:"estimatedStart"`
	Basis          string `json:"basis"`
	Reason         string `json:"reason"`
	Preempts       []struct {
		Team, Task, Class string
		GPUs              int64
	} `json:"preempts"`
	PreemptsHidden int    `json:"preemptsHidden"`
	Uncertain      string `json:"uncertain"`
	Verdict        string `json:"verdict"`
}

// askJSON gets path's answer as JSON.
func askJSON(t *testing.T, get func(path string) (int, string), path string) whatIfJSON {
	t.Helper()
	code, body := get(path + "&format=json")
	if code != http.StatusOK {
		t.Fatalf("JSON answer: %d\n%.400s", code, body)
	}
	var out whatIfJSON
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("JSON answer %q: %v", body, err)
	}
	return out
}

// jsonLink is the query of the answer's JSON link.
func jsonLink(t *testing.T, body string) url.Values {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	a := webtest.FindNode(doc, func(n *html.Node) bool { return webtest.Attr(n, "id") == "whatif-json" })
	if a == nil {
		t.Fatal("the answer has no JSON link")
	}
	return whatIfQuery(t, webtest.Attr(a, "href"))
}

func whatIfQuery(t *testing.T, address string) url.Values {
	t.Helper()
	u, err := url.Parse(address)
	if err != nil || u.Path != "/whatif" {
		t.Fatalf("address %q: %v", address, err)
	}
	return u.Query()
}

// getter gets a page from h without cookies or headers.
func getter(t *testing.T, h http.Handler) func(string) (int, string) {
	return func(path string) (int, string) { return webtest.Get(t, h, path) }
}

// fieldErrorsNextToFields are the page's field errors by field; each must
// sit next to its field, in the element that holds the field.
func fieldErrorsNextToFields(t *testing.T, body string) map[string]string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if field := webtest.Attr(n, "data-error-for"); field != "" {
			out[field] = webtest.NodeText(n)
			holder := webtest.FindNode(n.Parent, func(c *html.Node) bool { return webtest.Attr(c, "name") == field })
			if holder == nil && field != "rows" {
				t.Errorf("the error of %s is not next to its field", field)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

func TestWhatIfFormShowsEachErrorNextToItsField(t *testing.T) {
	f := newFixture(t, 2, 0)
	f.cluster.policy = domain.Policy{Prioritization: domain.TaskRanking, Classes: []domain.PriorityClass{{Name: "training", Weight: 10}}}
	h := f.handler()

	code, body := webtest.Get(t, h, "/whatif")
	if code != http.StatusOK {
		t.Fatalf("GET /whatif: %d", code)
	}
	webtest.MustContain(t, "the empty form", body, `href="/whatif" aria-current="page"`, `id="whatif-form"`, `<option value="team-001">`,
		`<option value="training">`, `name="row.0.instanceType"`)
	webtest.MustNotContain(t, "the empty form", body, `id="whatif-answer"`, `class="field-error"`, `name="row.1.instanceType"`)

	code, body = webtest.Get(t, h, "/whatif?team=&class=urgent&row.0.instanceType=ml.zz.huge&row.0.pods=two"+
		"&row.2.instanceType=ml.p5.48xlarge&row.2.pods=1&row.2.gpus=9&row.2.vcpu=4")
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("a form with errors: %d, want 422", code)
	}
	want := map[string]string{
		"team":               "Choose a team.",
		"class":              "Choose one of the cluster's priority classes, or none.",
		"row.0.instanceType": `Unknown instance type "ml.zz.huge".`,
		"row.1.gpus":         "Enter a whole number of GPUs per pod from 0 to 8: a pod runs on one instance, and ml.p5.48xlarge has 8.",
	}
	if diff := cmp.Diff(want, fieldErrorsNextToFields(t, body)); diff != "" {
		t.Errorf("field errors (-want +got):\n%s", diff)
	}
	webtest.MustContain(t, "the form with errors", body, `id="form-errors"`)
	typed := webtest.FormValues(t, body, "whatif-form")
	for field, value := range map[string]string{"team": "", "class": "urgent", "row.0.instanceType": "ml.zz.huge", "row.0.pods": "two",
		"row.1.instanceType": "ml.p5.48xlarge", "row.1.gpus": "9", "row.1.vcpu": "4", "row.2.pods": ""} {
		if got := typed.Get(field); got != value {
			t.Errorf("field %s shows %q, want %q as typed", field, got, value)
		}
	}

	code, body = webtest.Get(t, h, "/whatif?team=nobody&row.0.instanceType=ml.p5.48xlarge&row.0.pods=1&row.0.gpus=1&format=json")
	var errs map[string]map[string]string
	if err := json.Unmarshal([]byte(body), &errs); err != nil || code != http.StatusUnprocessableEntity {
		t.Fatalf("JSON of a form with errors: %d %q (%v)", code, body, err)
	}
	if diff := cmp.Diff(map[string]string{"team": `There is no team "nobody".`}, errs["errors"]); diff != "" {
		t.Errorf("JSON errors (-want +got):\n%s", diff)
	}
	if asked := f.whatIf.jobs(); len(asked) > 0 {
		t.Errorf("Kueue was asked about a form with errors: %v", asked)
	}
}

func TestWhatIfAnswersOnThePageAndAsJSON(t *testing.T) {
	f := newFixture(t, 2, 0)
	f.cluster.policy = domain.Policy{Prioritization: domain.TaskRanking, Classes: []domain.PriorityClass{{Name: "training", Weight: 10}}}
	f.cfg.TaskHistory = &taskHistory{rates: taskhistory.AdmissionRates{Recorded: 24 * time.Hour}}
	reason := "couldn't assign flavors to pod set pods-0: insufficient unused quota for nvidia.com/gpu in flavor ml.p5.48xlarge, 8 more needed"
	basis := "Kueue v0.19.2's scheduler over a copy of 2 ClusterQueues and 5 Workloads, 4 cycles in 3ms."
	f.whatIf.answer = domain.WhatIfAnswer{Position: 3, Reason: reason, Kueue: basis}
	h := f.handler()

	code, body := webtest.Get(t, h, whatIfJob)
	if code != http.StatusOK {
		t.Fatalf("the answer: %d\n%.400s", code, body)
	}
	webtest.MustContain(t, "the answer", html.UnescapeString(body), "It would wait, at position 3 in its team's queue.",
		"It would be at position 3 in its team's queue: 2 tasks ahead of it.",
		"Kueue's reason: "+reason, "Estimated wait: unknown: 2 ahead, no admissions recorded over the last day", basis)
	if link, asked := jsonLink(t, body), whatIfQuery(t, whatIfJob); link.Get("format") != "json" || link.Get("row.0.gpus") != asked.Get("row.0.gpus") ||
		link.Get("team") != asked.Get("team") || link.Get("class") != asked.Get("class") {
		t.Errorf("the JSON link asks %v, want the page's question %v", link, asked)
	}
	want := domain.WhatIf{Team: "team-001", Class: "training", Rows: []domain.WhatIfRow{{InstanceType: "ml.p5.48xlarge", Pods: 2, GPUs: 8}}}
	if diff := cmp.Diff([]domain.WhatIf{want}, f.whatIf.jobs()); diff != "" {
		t.Errorf("the job asked about (-want +got):\n%s", diff)
	}
	// The form shows what was asked.
	if typed := webtest.FormValues(t, body, "whatif-form"); typed.Get("team") != "team-001" || typed.Get("row.0.gpus") != "8" {
		t.Errorf("the form after the answer: %v", typed)
	}

	got := askJSON(t, getter(t, h), whatIfJob)
	if diff := cmp.Diff(whatIfJSON{Position: 3, EstimatedStart: "unknown", Basis: "unknown: 2 ahead, no admissions recorded over the last day",
		Reason: reason, Preempts: got.Preempts, Verdict: "It would wait, at position 3 in its team's queue."}, got); diff != "" || got.Preempts == nil {
		t.Errorf("JSON of a waiting job (-want +got):\n%s", diff)
	}

	f.whatIf.answer = domain.WhatIfAnswer{Admitted: true, Borrowing: true, Kueue: basis, Uncertain: "It asks for a topology.",
		Preempts: []domain.ImpactTask{
			{Namespace: "hyperpod-ns-team-000", Name: "batch-1", Team: "team-000", Class: "batch", GPUs: 8, Ran: time.Hour, GPUHours: 8},
			{Namespace: "hyperpod-ns-team-001", Name: "batch-2", Team: "team-001", Class: "batch", GPUs: 4, Ran: 30 * time.Minute, GPUHours: 2},
		}}
	h = f.handler()
	_, body = webtest.Get(t, h, whatIfJob)
	webtest.MustContain(t, "an answer with preemptions", body, "It would start now, by preempting 2 tasks.",
		"It would borrow: its team would hold more than its quota", `id="whatif-preempts"`, "hyperpod-ns-team-000/batch-1",
		"hyperpod-ns-team-001/batch-2", `id="whatif-uncertain"`)
	if n := strings.Count(body, "It would start now"); n != 1 {
		t.Errorf("the answer says it would start now %d times, want once (the verdict)", n)
	}
	webtest.MustNotContain(t, "an answer with preemptions", body, `id="whatif-position"`, `id="whatif-preempts-hidden"`)
	got = askJSON(t, getter(t, h), whatIfJob)
	if diff := cmp.Diff(whatIfJSON{Admitted: true, Borrowing: true, EstimatedStart: "now", Uncertain: "It asks for a topology.",
		Preempts: []struct {
			Team, Task, Class string
			GPUs              int64
		}{{"team-000", "hyperpod-ns-team-000/batch-1", "batch", 8}, {"team-001", "hyperpod-ns-team-001/batch-2", "batch", 4}},
		Verdict: "It would start now, by preempting 2 tasks."}, got); diff != "" {
		t.Errorf("JSON of a job that preempts (-want +got):\n%s", diff)
	}
}

// Without a task history the estimate says so, in the Tasks page's words.
func TestWhatIfEstimateWithoutTaskHistory(t *testing.T) {
	f := newFixture(t, 2, 0)
	f.whatIf.answer = domain.WhatIfAnswer{Position: 1}
	got := askJSON(t, getter(t, f.handler()), "/whatif?team=team-000&row.0.instanceType=ml.p5.48xlarge&row.0.pods=1&row.0.gpus=8")
	if got.EstimatedStart != "unknown" || got.Basis != "unknown: the console runs without a task history" {
		t.Errorf("estimate without a task history: %q, %q", got.EstimatedStart, got.Basis)
	}
}

// A member names only the tasks of teams they may see and counts the
// others; they may ask about their own teams only.
func TestWhatIfHidesTheTasksOfTeamsAMemberCannotSee(t *testing.T) {
	f := newFixture(t, 3, 0).withProxy()
	f.cluster.policy = domain.Policy{Prioritization: domain.TaskRanking, Classes: []domain.PriorityClass{{Name: "training", Weight: 10}}}
	f.access.grant("member", listWorkloads(f.settings.Namespace("team-001")))
	f.access.grant("viewer", listClusterQueues)
	f.whatIf.answer = domain.WhatIfAnswer{Admitted: true, Preempts: []domain.ImpactTask{
		{Namespace: "hyperpod-ns-team-000", Name: "secret-a", Team: "team-000", Class: "batch", GPUs: 8},
		{Namespace: "hyperpod-ns-team-001", Name: "own-1", Team: "team-001", Class: "batch", GPUs: 4},
		{Namespace: "hyperpod-ns-team-002", Name: "secret-b", Team: "team-002", Class: "batch", GPUs: 8},
	}}
	h := f.handler()
	member := user(t, h, "member")

	_, body := member.Get("/whatif")
	webtest.MustContain(t, "the member's form", body, `<option value="team-001">`)
	webtest.MustNotContain(t, "the member's form", body, "team-000", "team-002")

	code, body := member.Get(whatIfJob)
	if code != http.StatusOK {
		t.Fatalf("the member's answer: %d\n%.400s", code, body)
	}
	webtest.MustContain(t, "the member's answer", body, "It would start now, by preempting 3 tasks.", "hyperpod-ns-team-001/own-1",
		"and 2 tasks of teams you cannot see.")
	webtest.MustNotContain(t, "the member's answer", body, "secret-a", "secret-b", "team-000", "team-002")
	got := askJSON(t, member.Get, whatIfJob)
	if len(got.Preempts) != 1 || got.Preempts[0].Task != "hyperpod-ns-team-001/own-1" || got.PreemptsHidden != 2 {
		t.Errorf("the member's JSON names %+v and hides %d, want own-1 and 2 hidden", got.Preempts, got.PreemptsHidden)
	}

	code, body = member.Get(strings.Replace(whatIfJob, "team-001", "team-002", 1))
	if code != http.StatusUnprocessableEntity || !strings.Contains(html.UnescapeString(body), `You cannot see team "team-002".`) {
		t.Errorf("a member asking about another team: %d\n%.400s", code, body)
	}
	for _, job := range f.whatIf.jobs() {
		if job.Team != "team-001" {
			t.Errorf("Kueue was asked about team %s for a member of team-001", job.Team)
		}
	}

	got = askJSON(t, user(t, h, "viewer").Get, strings.Replace(whatIfJob, "team-001", "team-002", 1))
	if len(got.Preempts) != 3 || got.PreemptsHidden != 0 {
		t.Errorf("a platform viewer's JSON names %+v and hides %d, want all 3", got.Preempts, got.PreemptsHidden)
	}
}

// Without an answer (the cache not synced, Kueue's scheduler failing) the
// page says why, and so does the JSON.
func TestWhatIfWithoutAnAnswerSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		err  error
		says string
	}{
		{kueue.ErrNoPreview, "The console is still reading the cluster; ask again in a moment."},
		{errors.New("kueue's scheduler failed"), "Kueue's answer could not be computed: kueue's scheduler failed."},
	} {
		f := newFixture(t, 2, 0)
		f.whatIf.err = tc.err
		h := f.handler()
		code, body := webtest.Get(t, h, "/whatif?team=team-001&row.0.instanceType=ml.p5.48xlarge&row.0.pods=1&row.0.gpus=8")
		if code != http.StatusServiceUnavailable || !strings.Contains(html.UnescapeString(body), tc.says) || strings.Contains(body, `id="whatif-answer"`) {
			t.Errorf("%v: %d\n%.600s", tc.err, code, body)
		}
		code, body = webtest.Get(t, h, "/whatif?team=team-001&row.0.instanceType=ml.p5.48xlarge&row.0.pods=1&row.0.gpus=8&format=json")
		var problem map[string]string
		if err := json.Unmarshal([]byte(body), &problem); err != nil || code != http.StatusServiceUnavailable || problem["problem"] != tc.says {
			t.Errorf("%v as JSON: %d %q", tc.err, code, body)
		}
	}
}

// A team with no LocalQueue a job could start from (none, or only in
// namespaces its ClusterQueue does not admit) is no failure of the console:
// the answer says so at the team, as a field of the question, not 503.
func TestWhatIfOfATeamWithoutAUsableLocalQueue(t *testing.T) {
	f := newFixture(t, 2, 0)
	f.whatIf.err = fmt.Errorf("team team-001 has %w", kueue.ErrNoLocalQueue)
	h := f.handler()
	code, body := webtest.Get(t, h, "/whatif?team=team-001&row.0.instanceType=ml.p5.48xlarge&row.0.pods=1&row.0.gpus=8")
	if code != http.StatusUnprocessableEntity {
		t.Errorf("the page: %d, want 422", code)
	}
	if got := fieldErrorsNextToFields(t, body)["team"]; !strings.Contains(got, "has no LocalQueue in a namespace its ClusterQueue admits") {
		t.Errorf("the team field's error: %q", got)
	}
	code, body = webtest.Get(t, h, "/whatif?team=team-001&row.0.instanceType=ml.p5.48xlarge&row.0.pods=1&row.0.gpus=8&format=json")
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "has no LocalQueue") {
		t.Errorf("as JSON: %d %.300s", code, body)
	}
}

// A ClusterQueue the console does not manage, made as Kueue's getting-started
// example makes it (vCPU and memory on a flavor that is no instance type),
// can be asked about: its team and its flavor are choices, Kueue is asked
// about the job as typed, and its estimate counts the tasks ahead of it.
func TestWhatIfAsksAboutAQueueTheConsoleDoesNotManage(t *testing.T) {
	f := newFixture(t, 1, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	objs.AddQuickStart()
	f.model.publish(snapshotOf(s, objs, now))
	f.cfg.TaskHistory = &taskHistory{rates: taskhistory.AdmissionRates{Recorded: 24 * time.Hour}}
	f.whatIf.answer = domain.WhatIfAnswer{Position: 2, Reason: "insufficient unused quota for cpu in flavor default-flavor, 3 more needed",
		LocalQueue: "default/user-queue", LocalQueues: 2}
	get := getter(t, f.handler())

	_, body := get("/whatif")
	webtest.MustContain(t, "the empty form", body, `<option value="cluster-queue">`, `<option value="default-flavor">`)

	a := askJSON(t, get, "/whatif?team=cluster-queue&row.0.instanceType=default-flavor&row.0.pods=3&row.0.vcpu=1")
	want := []domain.WhatIf{{Team: "cluster-queue", Rows: []domain.WhatIfRow{{InstanceType: "default-flavor", Pods: 3, CPUMilli: 1000}}}}
	if diff := cmp.Diff(want, f.whatIf.jobs()); diff != "" {
		t.Errorf("Kueue was asked (-want +got):\n%s", diff)
	}
	if a.Position != 2 || !strings.Contains(a.Basis, "1 ahead") {
		t.Errorf("answer: position %d, estimate %q; want position 2, estimated with 1 ahead", a.Position, a.Basis)
	}
	// The answer names the LocalQueue it is for, one of two.
	_, body = get("/whatif?team=cluster-queue&row.0.instanceType=default-flavor&row.0.pods=3&row.0.vcpu=1")
	webtest.MustContain(t, "the answer", body, `id="whatif-local-queue"`,
		"Asked for a job in LocalQueue default/user-queue, the first of the 2 that feed the team&#39;s ClusterQueue; in another one its place may differ.")
}

// A cluster whose Jobs name Kubernetes PriorityClasses (priorityClassName)
// may ask about a job of one of them: Kueue is asked with its priority.
func TestWhatIfOffersTheClassesTasksName(t *testing.T) {
	f := newFixture(t, 2, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	objs.Workloads = append(objs.Workloads, kueuetest.MakeWorkload(s, s.Namespace("team-000"), "urgent").Queue(s.LocalQueue("team-000")).
		PodClass("business-critical", 1_000_000).GPUs(1, 1).Created(now).Pending("Pending", "waits for quota", now).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	h := f.handler()

	_, body := webtest.Get(t, h, "/whatif")
	webtest.MustContain(t, "the form's classes", body, `<option value="business-critical">`, `<option value="training">`)
	code, _ := webtest.Get(t, h, strings.Replace(whatIfJob, "class=training", "class=business-critical", 1))
	asked := f.whatIf.jobs()
	if code != http.StatusOK || len(asked) != 1 {
		t.Fatalf("a job of a Kubernetes PriorityClass: %d, asked %d times", code, len(asked))
	}
	if p := asked[0].PodClassPriority; p == nil || *p != 1_000_000 {
		t.Errorf("Kueue was asked at priority %v, want the PriorityClass's 1000000", p)
	}
	webtest.Get(t, h, whatIfJob)
	if asked = f.whatIf.jobs(); len(asked) != 2 || asked[1].PodClassPriority != nil {
		t.Errorf("a job of a WorkloadPriorityClass was asked as a Kubernetes PriorityClass: %+v", asked)
	}
}
