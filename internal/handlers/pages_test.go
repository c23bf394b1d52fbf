package handlers_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
)

// Every page answers 200 from its sources and shows what they hold.
func TestEveryPageShowsWhatItsSourcesHold(t *testing.T) {
	f := newFixture(t, 3, 60)
	f.cluster.teamRevisions = map[string][]domain.TeamRevision{"team-001": {
		{Revision: 2, At: time.Now(), By: "alice", Action: domain.ActionUpdate, Allocation: domain.Team{Name: "team-001", FairShareWeight: 20}},
		{Revision: 1, At: time.Now().Add(-time.Hour), By: "alice", Action: domain.ActionCreate, Allocation: domain.Team{Name: "team-001", FairShareWeight: 10}},
	}}
	f.cfg.TaskHistory = &taskHistory{preemptions: []taskhistory.Preemption{{At: time.Now().Add(-time.Hour),
		Task: taskhistory.TaskRef{Namespace: f.settings.Namespace("team-001"), Name: "victim", Team: "team-001", Class: "batch"}, GPUs: 2,
		Preemptor: taskhistory.TaskRef{Team: "team-002", Class: "inference"}, Reason: "InCohortReclamation"}},
		report: []taskhistory.ReportRow{{Task: taskhistory.TaskRef{Namespace: f.settings.Namespace("team-002"), Name: "reported", Team: "team-002"}}}}
	f.cfg.Prometheus = prometheus{util: map[string]float64{f.settings.Namespace("team-000"): 73}}
	h := f.handler()
	for path, wants := range map[string][]string{
		"/":                       {`id="cluster-queues"`, f.settings.ClusterQueue("team-002")},
		"/usage":                  {`data-team="team-000"`, "73 %"},
		"/usage/team-001":         {"Team team-001", `id="team-summary"`},
		"/tasks?state=all":        {`id="class-stats"`, `id="team-class-stats"`, "job-000001"},
		"/teams":                  {`data-team="team-002"`},
		"/teams/new":              {`id="team-form"`},
		"/teams/team-001/edit":    {`id="team-form"`, `value="team-001"`},
		"/teams/team-001/delete":  {`id="confirm-delete"`, "job-000001"},
		"/teams/team-001/history": {`id="revisions"`, "fair-share weight 10 → 20"},
		"/teams/team-001/drift":   {`id="no-drift"`},
		"/policy":                 {`id="policy-form"`},
		"/policy/history":         {`id="no-revisions"`},
		"/preemptions":            {`id="preemptions"`, "/victim"},
		"/reports/usage":          {`id="task-report"`, "/reported"},
	} {
		code, body := webtest.Get(t, h, path)
		if code != http.StatusOK {
			t.Errorf("GET %s = %d\n%.300s", path, code, body)
			continue
		}
		webtest.MustContain(t, "GET "+path, body, wants...)
		webtest.MustNotContain(t, "GET "+path, body, `id="problem"`)
	}
}

// With Prometheus down, every page still answers 200: what comes from
// Kubernetes renders, and the Prometheus panels say they are unavailable.
func TestPagesAnswerWithPrometheusDown(t *testing.T) {
	f := newFixture(t, 2, 10)
	f.cfg.Prometheus = prometheus{err: errors.New("dial tcp 127.0.0.1:1: connect: connection refused")}
	h := f.handler()
	for path, want := range map[string]string{
		"/":                    "Prometheus is unavailable",
		"/usage":               "Prometheus is unavailable",
		"/usage/team-001":      "Prometheus is unavailable",
		"/reports/usage":       "Prometheus is unavailable",
		"/tasks":               `id="class-stats"`,
		"/teams":               `data-team="team-001"`,
		"/policy":              `id="policy-form"`,
		"/teams/team-001/edit": `value="team-001"`,
	} {
		code, body := webtest.Get(t, h, path)
		if code != http.StatusOK {
			t.Errorf("GET %s = %d with Prometheus down", path, code)
			continue
		}
		webtest.MustContain(t, "GET "+path, body, want)
		webtest.MustNotContain(t, "GET "+path, body, "connection refused")
	}
	if _, body := webtest.Get(t, h, "/usage"); !strings.Contains(body, `data-team="team-001"`) {
		t.Errorf("/usage lost the Kubernetes data while Prometheus is down")
	}
	// Without Prometheus at all, the pages say how to get it.
	f.cfg.Prometheus = nil
	_, body := webtest.Get(t, f.handler(), "/")
	webtest.MustContain(t, "GET / without Prometheus", body, "start the console with --prometheus-url")
}

// When the caches are incomplete or the apiserver stops answering, pages
// keep showing what they have and say why; /readyz says the same.
func TestPagesSayWhenTheClusterIsBehind(t *testing.T) {
	f := newFixture(t, 2, 10)
	f.cluster.ready = errors.New("the cluster does not serve the Kueue API kueue.x-k8s.io/v1beta2")
	h := f.handler()
	_, body := webtest.Get(t, h, "/")
	webtest.MustContain(t, "GET / with caches not ready", body, `id="problem"`, "Live data is incomplete", "kueue.x-k8s.io/v1beta2")
	if code, text := webtest.Get(t, h, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(text, "Kueue") {
		t.Errorf("/readyz = %d %q, want 503 naming Kueue", code, text)
	}

	f.cluster.ready, f.cluster.reachable, f.cluster.since = nil, false, time.Now().Add(-time.Minute)
	_, body = webtest.Get(t, f.handler(), "/usage")
	webtest.MustContain(t, "GET /usage with the apiserver unreachable", body, "has not answered since", `data-team="team-001"`)
	if code, _ := webtest.Get(t, f.handler(), "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with synced caches = %d", code)
	}

	// Started while the cluster was down: the banner says it is the
	// cluster that does not answer, not only that the caches are behind.
	f.cluster.ready = errors.New("node and revision history informers not synced")
	_, body = webtest.Get(t, f.handler(), "/")
	webtest.MustContain(t, "GET / with the apiserver down from the start", body, "has not answered since", "has not read all of it yet", "informers not synced")
}

// Without a task history (none, or a store that does not answer), every page
// built on it answers: HTML pages 200 and say the history is unavailable;
// the Tasks page's CSVs fall back to the live figures; the CSVs that only
// the history can fill answer 503 with the same words rather than an empty
// table.
func TestTaskHistoryPagesWithoutAStore(t *testing.T) {
	type page struct {
		path string
		code int
		note bool // the page says the history is unavailable
	}
	unavailable := []page{
		{"/tasks", http.StatusOK, true},
		{"/tasks?window=30d", http.StatusOK, true},
		{"/tasks?window=30d&format=csv&table=classes", http.StatusOK, false},
		{"/tasks?format=csv&table=tasks&state=all", http.StatusOK, false},
		{"/preemptions", http.StatusOK, true},
		{"/preemptions?format=csv", http.StatusServiceUnavailable, true},
		{"/reports/usage?source=history", http.StatusOK, true},
		{"/reports/usage?source=history&format=csv&table=summary", http.StatusServiceUnavailable, true},
		{"/reports/usage?source=history&format=csv&table=tasks", http.StatusServiceUnavailable, true},
		{"/usage/team-001", http.StatusOK, true},
	}
	check := func(t *testing.T, h http.Handler, pages []page) {
		for _, p := range pages {
			code, body := webtest.Get(t, h, p.path)
			if code != p.code {
				t.Errorf("GET %s = %d, want %d\n%.300s", p.path, code, p.code, body)
			}
			if note := strings.Contains(body, "The task history is unavailable"); note != p.note {
				t.Errorf("GET %s: says the history is unavailable: %v, want %v", p.path, note, p.note)
			}
		}
	}
	t.Run("none", func(t *testing.T) {
		f := newFixture(t, 2, 10)
		// The usage page has no history section at all then.
		pages := append(slices.Clone(unavailable[:len(unavailable)-1]), page{"/usage/team-001", http.StatusOK, false})
		check(t, f.handler(), pages)
	})
	t.Run("unreachable", func(t *testing.T) {
		f := newFixture(t, 2, 10)
		f.cfg.TaskHistory = &taskHistory{err: errors.New("the task history store is unreachable: dial tcp 127.0.0.1:1: connect: connection refused")}
		check(t, f.handler(), unavailable)
		_, body := webtest.Get(t, f.handler(), "/tasks")
		webtest.MustContain(t, "Tasks page", body, "The task history is unavailable right now.", "The figures cover only the tasks that still exist in the cluster.")
		webtest.MustNotContain(t, "Tasks page", body, "connection refused") // logged, not shown
	})
	t.Run("answering", func(t *testing.T) {
		f := newFixture(t, 2, 10)
		f.cfg.TaskHistory = &taskHistory{}
		var answering []page
		for _, p := range unavailable {
			answering = append(answering, page{p.path, http.StatusOK, false})
		}
		check(t, f.handler(), answering)
	})
}

// A task history that cannot be read put its error on every page built on
// it, for every viewer: the database server's name and address, its user
// and driver. The pages say the history is unavailable in a plain
// sentence, and the error goes to the log.
func TestTaskHistoryErrorsAreLoggedNotShown(t *testing.T) {
	f := newFixture(t, 2, 10)
	secret := "task history store postgres://db.internal.example:5432/quota_console: failed to connect to `user=console database=quota_console`: dial tcp 10.1.2.3:5432: connect: connection refused"
	f.cfg.TaskHistory = &taskHistory{err: errors.New(secret)}
	h := f.handler()
	for _, path := range []string{"/tasks", "/preemptions", "/preemptions?format=csv", "/reports/usage?source=history",
		"/reports/usage?source=history&format=csv&table=summary", "/reports/usage?source=history&format=csv&table=tasks", "/usage/team-001"} {
		_, body := webtest.Get(t, h, path)
		webtest.MustNotContain(t, path, body, "db.internal.example", "10.1.2.3", "user=console", "dial tcp")
		webtest.MustContain(t, path, body, "The task history is unavailable right now.")
	}
}

// A queued task's estimated wait is its place in its ClusterQueue at the
// rate the task history says the queue admits (the rule and its words are
// taskhistory.QueuedTaskWait's, tested there); Kueue's own positions win
// over the console's estimate of its order, in the estimate and in the
// queue position beside it alike.
func TestEstimatedWaitsUseTheAdmissionRates(t *testing.T) {
	f := newFixture(t, 1, 0)
	s := f.settings
	now := time.Now()
	ns, cq := s.Namespace("team-000"), s.ClusterQueue("team-000")
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	for i, name := range []string{"first", "second"} {
		objs.Workloads = append(objs.Workloads, kueuetest.MakeWorkload(s, ns, name).Queue(s.LocalQueue("team-000")).GPUs(1, 1).
			Created(now.Add(time.Duration(i-10)*time.Minute)).Pending("Pending", "waits for quota", now).Obj())
	}
	f.model.publish(snapshotOf(s, objs, now))
	f.cfg.TaskHistory = &taskHistory{rates: taskhistory.AdmissionRates{Recorded: 24 * time.Hour}}
	basis := func(h http.Handler) map[string]string {
		code, body := webtest.Get(t, h, "/tasks?format=csv&table=tasks&state=Queued")
		header, rows := webtest.ReadCSV(t, "the tasks CSV", code, body)
		out := map[string]string{}
		for name, r := range webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Task"] }) {
			out[name] = "#" + r["Queue position"] + " " + r["Estimated wait"]
		}
		return out
	}
	want := map[string]string{
		"first":  "#1 unknown: 0 ahead, no admissions recorded over the last day",
		"second": "#2 unknown: 1 ahead, no admissions recorded over the last day",
	}
	if diff := cmp.Diff(want, basis(f.handler())); diff != "" {
		t.Errorf("estimated waits by the console's order (-want +got):\n%s", diff)
	}
	f.cfg.Positions = positions{cq: {domain.LocalQueueKey(ns, "second"): 0, domain.LocalQueueKey(ns, "first"): 1}}
	want["first"], want["second"] = "#2 unknown: 1 ahead, no admissions recorded over the last day", "#1 unknown: 0 ahead, no admissions recorded over the last day"
	if diff := cmp.Diff(want, basis(f.handler())); diff != "" {
		t.Errorf("estimated waits by Kueue's own positions (-want +got):\n%s", diff)
	}
}

var taskRowRE = regexp.MustCompile(`<tr data-task="([^"]+)"`)

func listed(body string) []string {
	var names []string
	for _, m := range taskRowRE.FindAllStringSubmatch(body, -1) {
		names = append(names, m[1][strings.Index(m[1], "/")+1:])
	}
	return names
}

func pad(i int) string { return strings.Repeat("0", 6-len(strconv.Itoa(i))) + strconv.Itoa(i) }

// The task list's paging, sorting and search, on a read model of 200 teams
// and 2 000 Workloads.
func TestTaskListPagesSortsAndSearches(t *testing.T) {
	h := newFixture(t, 200, 2_000).handler() // team-007 has 10 tasks

	code, body := webtest.Get(t, h, "/tasks?state=all&sort=name&page=2")
	if code != 200 {
		t.Fatalf("GET = %d", code)
	}
	var want []string
	for i := 50; i < 100; i++ {
		want = append(want, "job-"+pad(i))
	}
	if diff := cmp.Diff(want, listed(body)); diff != "" {
		t.Errorf("page 2 by name (-want +got):\n%s", diff)
	}
	webtest.MustContain(t, "page 2", body, "Tasks 51–100 of 2000 (page 2 of 40).",
		`href="/tasks?page=3&amp;sort=name&amp;state=all" rel="next"`, `href="/tasks?sort=name&amp;state=all" rel="prev"`,
		// The current sort's heading sorts the other way round; the others by themselves, from page 1.
		`aria-sort="ascending"><a href="/tasks?desc=1&amp;sort=name&amp;state=all">Task</a>`,
		`<a href="/tasks?sort=gpus&amp;state=all">GPUs</a>`,
		// The list's waits and runs so far move with the clock's cadence, and the page says so.
		"move on every 30s, not with every change")

	_, body = webtest.Get(t, h, "/tasks?state=all&sort=name&desc=1")
	if got := listed(body); len(got) != 50 || got[0] != "job-001999" || got[49] != "job-001950" {
		t.Errorf("by name, descending: %v … (%d)", got[:1], len(got))
	}

	_, body = webtest.Get(t, h, "/tasks?state=all&q=JOB-00123")
	got := listed(body)
	slices.Sort(got)
	if diff := cmp.Diff([]string{"job-001230", "job-001231", "job-001232", "job-001233", "job-001234", "job-001235",
		"job-001236", "job-001237", "job-001238", "job-001239"}, got); diff != "" {
		t.Errorf("search (-want +got):\n%s", diff)
	}
	webtest.MustContain(t, "search", body, "Tasks 1–10 of 10 (page 1 of 1).", `value="JOB-00123"`)

	// Past the last page: the last page.
	_, body = webtest.Get(t, h, "/tasks?team=team-007&state=all&page=9")
	webtest.MustContain(t, "one team", body, "Tasks 1–10 of 10 (page 1 of 1).")

	// The CSV has every task of the view, in its order, not one page.
	_, csvBody := webtest.Get(t, h, "/tasks?format=csv&table=tasks&state=all&sort=name")
	lines := strings.Split(strings.TrimSpace(csvBody), "\n")
	if len(lines) != 2_001 || !strings.Contains(lines[1], ",job-000000,") || !strings.Contains(lines[2000], ",job-001999,") {
		t.Errorf("CSV: %d lines, first %q, last %q", len(lines), lines[1], lines[len(lines)-1])
	}
}

// Strings an admin typed into the team form and strings a Workload carries
// come out escaped on every page (those that reflect the URL's values too),
// and neutralized in CSV exports.
func TestHostileStringsAreEscaped(t *testing.T) {
	f := newFixture(t, 1, 0)
	s, now := f.settings, time.Now()
	const team = "xss"
	description := strings.Join(webtest.HostilePayloads, " ")
	var members []domain.Member
	for _, p := range webtest.HostilePayloads {
		members = append(members, domain.Member{Kind: "User", Name: p})
	}
	for _, p := range webtest.CSVPayloads[:4] {
		members = append(members, domain.Member{Kind: "Group", Name: p})
	}
	f.cluster.addTeam(s, domain.Team{Name: team, Description: description, Members: members, FairShareWeight: 1,
		Preemption: domain.PreemptNever, Lending: domain.DontLend, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge"}}})
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	objs.ClusterQueues = append(objs.ClusterQueues, kueuetest.MakeClusterQueue(s.ClusterQueue(team)).Cohort(s.Cohort).Nominal(2, nil).Obj())
	ns := s.Namespace(team)
	messages := map[string]string{}
	for i, m := range append(slices.Clone(webtest.HostilePayloads), webtest.CSVPayloads...) {
		name := "hostile-" + strconv.Itoa(i)
		messages[name] = m
		objs.Workloads = append(objs.Workloads, kueuetest.MakeWorkload(s, ns, name).Queue(s.LocalQueue(team)).GPUs(1, 1).Created(now).
			Condition(kueuev1beta2.WorkloadFinished, true, kueuev1beta2.WorkloadFinishedReasonSucceeded, m, now).Obj())
	}
	f.model.publish(snapshotOf(s, objs, now))
	h := f.handler()

	// CSV: a cell a spreadsheet would evaluate starts with a quote.
	code, body := webtest.Get(t, h, "/tasks?team="+team+"&state=all&format=csv&table=tasks")
	header, rows := webtest.ReadCSV(t, "the tasks CSV", code, body)
	byName := webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Task"] })
	for name, m := range messages {
		got := byName[name]["Kueue message"]
		want := m
		if strings.ContainsRune("=+-@\t\r", rune(m[0])) {
			want = "'" + m
		}
		if got != want {
			t.Errorf("tasks CSV: message %q exported as %q, want %q", m, got, want)
		}
	}
	// Filter values from the URL land in CSV cells too (the class column).
	for _, p := range webtest.CSVPayloads {
		for _, table := range []string{"classes", "breakdown"} {
			path := "/tasks?format=csv&table=" + table + "&state=all&class=" + url.QueryEscape(p)
			code, body := webtest.Get(t, h, path)
			_, rows := webtest.ReadCSV(t, path, code, body)
			for _, r := range rows {
				for _, cell := range r {
					if cell == "" {
						continue
					}
					if _, err := strconv.ParseFloat(cell, 64); err != nil && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
						t.Errorf("GET %s: formula cell %q", path, cell)
					}
				}
			}
		}
	}

	// HTML: every page, including ones that reflect the URL's values.
	for _, path := range webtest.HostilePages(team) {
		rec := webtest.NewBrowser(t, h, nil).Do(newGet(path))
		if rec.Code >= 500 {
			t.Errorf("GET %s: %d\n%s", path, rec.Code, rec.Body.String())
			continue
		}
		switch ct := rec.Header().Get("Content-Type"); {
		case strings.HasPrefix(ct, "text/html"):
			webtest.CheckNoMarkup(t, "GET "+path, rec.Body.String())
		case strings.HasPrefix(ct, "application/json"):
			for _, p := range webtest.HostilePayloads {
				if strings.ContainsAny(p, "<>&") && strings.Contains(rec.Body.String(), p) {
					t.Errorf("GET %s: JSON carries %q unescaped", path, p)
				}
			}
		case strings.HasPrefix(ct, "text/plain"): // error messages: never rendered as markup
		default:
			t.Errorf("GET %s: unexpected content type %q", path, ct)
		}
	}

	// The edit form shows the hostile description and members back as text.
	_, body = webtest.Get(t, h, "/teams/"+team+"/edit")
	webtest.MustContain(t, "the edit form", body, "&lt;script&gt;alert(1)&lt;/script&gt;")
	// The tasks page shows each message as the tooltip of its row, as text.
	_, body = webtest.Get(t, h, "/tasks?team="+team+"&state=all")
	for name, m := range messages {
		if !strings.Contains(body, `data-task="`+ns+`/`+name+`"`) {
			t.Errorf("tasks page lists no %s (message %q)", name, m)
		}
	}
}

func newGet(path string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, path, nil)
	return r
}

// The team × class table names the rows of tasks in no team's queue, and
// of queues the task history recorded that are gone, for what they are.
func TestTeamClassRowsOfNoTeamAndGoneQueues(t *testing.T) {
	f := newFixture(t, 2, 4)
	f.cfg.TaskHistory = &taskHistory{stats: taskhistory.WindowStats{Groups: []taskhistory.GroupStats{
		{Team: "team-000", Class: "batch", Samples: 1},
		{Team: "gone-queue", Class: "batch", Samples: 1},
		{Team: "", Class: "batch", Samples: 1},
	}}}
	_, body := webtest.Get(t, f.handler(), "/tasks?window=7d")
	webtest.MustContain(t, "/tasks", body, "(no team)</td>", `>gone-queue</span><span class="hint"> (no longer a queue)</span>`)
	webtest.MustNotContain(t, "/tasks", body, `>team-000</span><span class="hint">`)
}

// The policy page warns when Kueue lets Jobs that name no LocalQueue run
// outside every quota, and not once Kueue holds them; when Kueue's
// configuration cannot be read it warns about nothing.
func TestPolicyPageWarnsOfJobsOutsideEveryQuota(t *testing.T) {
	for _, tc := range []struct {
		name    string
		manages bool
		err     error
		warns   bool
	}{
		{"Kueue lets them run", false, nil, true},
		{"Kueue holds them", true, nil, false},
		{"configuration unreadable", false, errors.New("configmaps is forbidden"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 1, 1)
			f.cluster.managesJobsWithoutQueue, f.cluster.fairSharingErr = tc.manages, tc.err
			code, body := webtest.Get(t, f.handler(), "/policy")
			if code != http.StatusOK {
				t.Fatalf("GET /policy = %d", code)
			}
			if got := strings.Contains(body, `id="unqueued-jobs-warning"`); got != tc.warns {
				t.Errorf("warns = %v, want %v", got, tc.warns)
			}
		})
	}
}

// Revisions that could not be read are not said to be none.
func TestUnreadRevisionsAreNotSaidToBeNone(t *testing.T) {
	f := newFixture(t, 2, 0)
	f.cluster.revisionsErr = errors.New("context deadline exceeded")
	h := f.handler()
	for _, path := range []string{"/teams/team-001/history", "/policy/history"} {
		_, body := webtest.Get(t, h, path)
		webtest.MustNotContain(t, path, body, `id="no-revisions"`)
		webtest.MustContain(t, path, body, `id="apply-error"`)
	}
}

// A window the statistics do not offer (?window=30m, a typo) shows the
// default window as chosen, and the exports name the window they cover.
func TestTaskStatisticsSayTheirWindow(t *testing.T) {
	f := newFixture(t, 2, 6)
	h := f.handler()
	_, body := webtest.Get(t, h, "/tasks?window=30m")
	webtest.MustContain(t, "an unknown window", body, `<option value="24h" selected>`)
	for path, want := range map[string]string{
		"/tasks?window=abc&format=csv&table=classes":  `filename="task-stats-by-class-24h.csv"`,
		"/tasks?window=7d&format=csv&table=breakdown": `filename="task-stats-by-team-and-class-7d.csv"`,
	} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = "127.0.0.1:8080"
		h.ServeHTTP(rec, r)
		if got := rec.Header().Get("Content-Disposition"); !strings.Contains(got, want) {
			t.Errorf("GET %s: Content-Disposition %q, want %s", path, got, want)
		}
	}
}

// Before the console has read the whole cluster, the live exports answered
// 200 with a header and no rows, which a spreadsheet reads as "no teams, no
// tasks": they answer 503 with the reason, as the history's do.
func TestLiveExportsWaitForTheCluster(t *testing.T) {
	f := newFixture(t, 2, 1)
	f.cluster.ready = errors.New("not read from the cluster yet: Workloads")
	for _, path := range []string{"/?format=csv", "/tasks?format=csv", "/usage?format=csv", "/teams?format=csv", "/insights?format=csv"} {
		code, body := webtest.Get(t, f.handler(), path)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "not read from the cluster yet: Workloads") {
			t.Errorf("GET %s before the cluster was read: %d %.200q, want 503 with the reason", path, code, body)
		}
	}
	f.cluster.ready = nil
	if code, body := webtest.Get(t, f.handler(), "/tasks?format=csv"); code != http.StatusOK {
		t.Errorf("GET /tasks?format=csv once read: %d %.200q", code, body)
	}
}
