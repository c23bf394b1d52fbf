package handlers_test

import (
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
)

// Reading needs a right the cluster grants (asked about the user): a
// platform viewer sees every team, a team member their team's pages and the
// cluster's totals, anyone else a 403 that names the missing right; and
// when the cluster cannot say, nothing is shown.
func TestPagesNeedAReadRightTheClusterGrants(t *testing.T) {
	f := newFixture(t, 3, 60).withProxy()
	f.access.grant("viewer", listClusterQueues)
	f.access.grant("member", listWorkloads(f.settings.Namespace("team-001")))
	h := f.handler()

	nobody := user(t, h, "nobody")
	for _, path := range []string{"/", "/usage", "/tasks", "/teams", "/policy", "/usage/team-001", "/teams/team-002/history", "/tasks?format=csv&table=tasks"} {
		code, body := nobody.Get(path)
		if code != http.StatusForbidden {
			t.Errorf("nobody GET %s: %d, want 403", path, code)
		}
		webtest.MustNotContain(t, "nobody's "+path, body, "job-0000", "team-001")
		webtest.MustContain(t, "nobody's "+path, body, "list on ClusterQueues", "list on Workloads")
	}

	member := user(t, h, "member")
	if code, body := member.Get("/usage/team-001"); code != http.StatusOK || !strings.Contains(body, "Team team-001") {
		t.Errorf("member GET /usage/team-001: %d", code)
	}
	for _, path := range []string{"/usage/team-002", "/teams/team-002/edit", "/teams/team-002/history", "/teams/team-002/drift"} {
		code, body := member.Get(path)
		if code != http.StatusForbidden {
			t.Errorf("member of team-001 GET %s: %d, want 403", path, code)
		}
		webtest.MustContain(t, "member's "+path, body, `may not see team "team-002"`,
			`list on Workloads in namespace "`+f.settings.Namespace("team-002")+`"`)
	}
	for _, path := range []string{"/tasks?state=all", "/tasks?format=csv&table=tasks&state=all", "/usage", "/teams"} {
		code, body := member.Get(path)
		if code != http.StatusOK {
			t.Errorf("member GET %s: %d", path, code)
		}
		webtest.MustContain(t, "member's "+path, body, "team-001")
		webtest.MustNotContain(t, "member's "+path, body, "team-002", "team-000")
	}

	viewer := user(t, h, "viewer")
	_, body := viewer.Get("/tasks?state=all")
	webtest.MustContain(t, "viewer's tasks", body, "team-000", "team-001", "team-002")

	f.access.unknown = true
	if code, body := viewer.Get("/teams"); code != http.StatusServiceUnavailable || !strings.Contains(body, "could not say what you may see") {
		t.Errorf("GET /teams while the cluster cannot answer access reviews: %d\n%.200s", code, body)
	}
}

// The 403 page named the team of the request's path as it came: a link
// with a team name of kilobytes (or with quotes and line breaks) put all of
// it on the page twice. It is quoted and shortened now.
func TestForbiddenTeamNameIsQuotedAndShort(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	f.access.grant("member", listWorkloads(f.settings.Namespace("team-001")))
	long := strings.Repeat("evil", 1000)
	code, body := user(t, f.handler(), "member").Get("/usage/" + long)
	if code != http.StatusForbidden {
		t.Fatalf("GET /usage/<4000 characters> as a member of another team = %d, want 403", code)
	}
	if strings.Contains(body, strings.Repeat("evil", 20)) {
		t.Errorf("the 403 page repeats the team name of the path at length (%d bytes)", len(body))
	}
	webtest.MustContain(t, "the 403 page", html.UnescapeString(body), `"evilevil`, `…"`)
}

// A member of team A opened /preemptions: a preemption of A's task by a
// task of team B, which they may not see, named B's task (namespace, name,
// UID) on the page, in the CSV and in Kueue's message (the preemptor's UID
// and JobUID). They see B's team and class only; a platform viewer still
// sees the task.
func TestPreemptorOfATeamTheViewerMayNotSeeIsNotNamed(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	s := f.settings
	victim, taker := "team-000", "team-001"
	f.access.grant("member", listWorkloads(s.Namespace(victim)))
	f.access.grant("viewer", listClusterQueues)
	secretName, secretUID, secretJob := "urgent-secret", "uid-secret", "job-secret"
	f.cfg.TaskHistory = &taskHistory{preemptions: []taskhistory.Preemption{{
		At:   time.Now().Add(-10 * time.Minute),
		Task: taskhistory.TaskRef{UID: "uid-victim", Namespace: s.Namespace(victim), Name: "big", Team: victim, Class: "low"}, GPUs: 2,
		Preemptor: taskhistory.TaskRef{UID: secretUID, Namespace: s.Namespace(taker), Name: secretName, Team: taker, Class: "high"},
		Reason:    "InCohortReclamation", ReasonWords: "Preempted: " + taker + " reclaimed its lent quota",
		Message: "Preempted to accommodate a workload (UID: " + secretUID + ", JobUID: " + secretJob + ") due to reclamation within the cohort",
	}}}
	h := f.handler()

	member := user(t, h, "member")
	code, page := member.Get("/preemptions")
	row, ok := webtest.HTMLRows(t, page, "preemptions", webtest.ByAttr("data-task"))[s.Namespace(victim)+"/big"]
	if code != http.StatusOK || !ok {
		t.Fatalf("the member does not see the preemption of their own team's task: %d\n%.800s", code, page)
	}
	webtest.MustNotContain(t, "the member's /preemptions", page, secretName, secretUID, secretJob)
	if !strings.Contains(strings.Join(row, "|"), taker+"|high") {
		t.Errorf("the member's row does not name the preemptor's team and class: %q", row)
	}
	code, body := member.Get("/preemptions?format=csv")
	header, rows := webtest.ReadCSV(t, "the member's preemptions CSV", code, body)
	webtest.MustNotContain(t, "the member's preemptions CSV", body, secretName, secretUID, secretJob)
	got := webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Task"] })["big"]
	if got["Preemptor team"] != taker || got["Preemptor class"] != "high" {
		t.Errorf("the member's CSV names preemptor team %q, class %q; want %s, high", got["Preemptor team"], got["Preemptor class"], taker)
	}

	viewer := user(t, h, "viewer")
	_, page = viewer.Get("/preemptions")
	webtest.MustContain(t, "a viewer's /preemptions", page, secretName)
	_, body = viewer.Get("/preemptions?format=csv")
	webtest.MustContain(t, "a viewer's preemptions CSV", body, secretName, secretUID)
}

// A viewer sees the forms with every field disabled and a note why; an
// admin sees them enabled; the console in auth mode none asks nobody.
func TestFormsAreReadOnlyWithoutTheRightToChange(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	f.access.grant("viewer", listClusterQueues)
	f.access.grant("admin", listClusterQueues, editTeams, deleteTeams, editPolicy)
	h := f.handler()
	forms := map[string]string{
		"/teams/team-001/edit":   "may not change ClusterQueues",
		"/teams/new":             "may not change ClusterQueues",
		"/teams/team-001/delete": "may not delete ClusterQueues",
		"/policy":                "may not change WorkloadPriorityClasses",
	}
	viewer, admin := user(t, h, "viewer"), user(t, h, "admin")
	for path, why := range forms {
		code, body := viewer.Get(path)
		if code != http.StatusOK {
			t.Errorf("viewer GET %s: %d", path, code)
		}
		webtest.MustContain(t, "viewer's "+path, body, `id="read-only-note"`, "Your account viewer "+why, " disabled")
		_, body = admin.Get(path)
		webtest.MustContain(t, "admin's "+path, body, `id="signed-in-user"`)
		webtest.MustNotContain(t, "admin's "+path, body, `id="read-only-note"`, "<fieldset disabled")
	}
	_, body := viewer.Get("/teams/team-001/edit")
	webtest.MustContain(t, "viewer's edit form", body, "<fieldset disabled", `id="save" disabled`)
}

// The preemption history puts tasks that name no class in the lowest
// class, as the Tasks page does: the store is asked for them with it. (The
// per-task report keeps what each task named: an export must not change
// when someone adds a lower class.)
func TestPreemptionsCountTasksWithoutAClassInTheLowest(t *testing.T) {
	f := newFixture(t, 1, 0)
	history := &taskHistory{}
	f.cfg.TaskHistory = history
	h := f.handler()
	classes := f.model.Snapshot().Classes
	if len(classes) == 0 {
		t.Fatal("the fixture has no priority classes")
	}
	lowest := classes[len(classes)-1]
	for _, path := range []string{"/preemptions?class=" + lowest, "/preemptions?format=csv"} {
		if code, _ := webtest.Get(t, h, path); code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
		if got := history.preemptionQuery.LowestClass; got != lowest {
			t.Errorf("%s asked the history with lowest class %q, want %q", path, got, lowest)
		}
	}
}

// A member of team A opened /tasks: A's preempted task showed Kueue's
// message with the preemptor's Workload and Job UIDs, of a team B they
// may not see, in the row and the CSV. The UIDs are not shown to them; a
// platform viewer still sees them.
func TestTasksDoNotShowAnotherTeamsPreemptorUIDs(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	s, now := f.settings, time.Now()
	victim := "team-000"
	secretUID, secretJob := "b52541e7-secret", "102d489e-secret"
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	objs.Workloads = append(objs.Workloads, kueuetest.MakeWorkload(s, s.Namespace(victim), "big").Queue(s.LocalQueue(victim)).GPUs(2, 1).
		Created(now.Add(-time.Hour)).Preempted(now.Add(-time.Minute), kueuev1beta2.InCohortReclamationReason,
		"Preempted to accommodate a workload (UID: "+secretUID+", JobUID: "+secretJob+") due to reclamation within the cohort; preemptor path: /"+s.Cohort+"/"+s.ClusterQueue("team-001")).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	f.access.grant("member", listWorkloads(s.Namespace(victim)))
	f.access.grant("viewer", listClusterQueues)
	h := f.handler()

	member := user(t, h, "member")
	for _, path := range []string{"/tasks?state=all", "/tasks?state=all&format=csv&table=tasks"} {
		code, body := member.Get(path)
		if code != http.StatusOK || !strings.Contains(body, "big") {
			t.Fatalf("the member's %s does not list their preempted task: %d\n%.600s", path, code, body)
		}
		webtest.MustNotContain(t, "the member's "+path, body, secretUID, secretJob)
		webtest.MustContain(t, "the member's "+path, html.UnescapeString(body), "UID: (not shown)")
	}
	_, body := user(t, h, "viewer").Get("/tasks?state=all&format=csv&table=tasks")
	webtest.MustContain(t, "a viewer's tasks CSV", body, secretUID, secretJob)
}

// Whoever may create a LocalQueue in a namespace of their own pointed it at
// team A's ClusterQueue, whose namespaceSelector does not admit that
// namespace: the namespace became A's, and everyone who may list Workloads
// there saw A's pages, tasks and exports, and the namespace's Workloads
// counted as A's pending demand. Kueue admits nothing from it; nor does
// the console make it A's.
func TestALocalQueueInANamespaceTheQueueDoesNotAdmitGivesNoTeam(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	s, now := f.settings, time.Now()
	team := "team-000"
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	objs.LocalQueues = append(objs.LocalQueues, kueuetest.MakeLocalQueue("rogue", "lq", s.ClusterQueue(team)))
	objs.Workloads = append(objs.Workloads, kueuetest.MakeWorkload(s, "rogue", "grab").Queue("lq").GPUs(8, 8).
		Created(now.Add(-time.Minute)).Pending("Pending", "namespace doesn't match ClusterQueue selector", now.Add(-time.Minute)).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	f.access.grant("intruder", listWorkloads("rogue"))
	f.access.grant("viewer", listClusterQueues)
	h := f.handler()

	intruder := user(t, h, "intruder")
	for _, path := range []string{"/usage/" + team, "/teams/" + team + "/history", "/tasks?team=" + team + "&format=csv&table=tasks"} {
		if code, body := intruder.Get(path); code != http.StatusForbidden {
			t.Errorf("GET %s by a user of a namespace the queue does not admit: %d\n%.300s", path, code, body)
		}
	}
	code, body := user(t, h, "viewer").Get("/usage?format=csv&resource=gpu")
	header, rows := webtest.ReadCSV(t, "the usage CSV", code, body)
	row := webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Team"] })[team]
	if row["Namespace"] != s.Namespace(team) || row["Pending demand (GPUs)"] != "0" {
		t.Errorf("team %s's usage row: namespaces %q, pending demand %q; want only its own namespace and none of the rogue's 64 GPUs",
			team, row["Namespace"], row["Pending demand (GPUs)"])
	}
}

// Whoever may create ClusterQueues made one with the console's labels
// claiming team A (managed by the console, imported, team A), serving a
// namespace of their own: its namespace is not A's, and its users see
// nothing of A.
func TestAQueueClaimingATeamGivesNoMembership(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	s, now := f.settings, time.Now()
	team := "team-000"
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	objs.ClusterQueues = append(objs.ClusterQueues, kueuetest.MakeClusterQueue("rogue-cq").Nominal(1, nil).
		Labels(domain.ManagedByLabel, domain.ManagedByValue, domain.TeamLabel, team, domain.ImportedLabel, "true").Obj())
	objs.LocalQueues = append(objs.LocalQueues, kueuetest.MakeLocalQueue("rogue", "lq", "rogue-cq"))
	f.model.publish(snapshotOf(s, objs, now))
	f.access.grant("intruder", listWorkloads("rogue"))
	h := f.handler()

	for _, path := range []string{"/usage/" + team, "/teams/" + team + "/history"} {
		if code, body := user(t, h, "intruder").Get(path); code != http.StatusForbidden {
			t.Errorf("GET %s by a user of a queue claiming the team: %d\n%.300s", path, code, body)
		}
	}
}

// A platform viewer, who may not list RoleBindings, read a team's members
// (what its member RoleBinding holds) in its read-only form and history.
// They are shown only to who may list the RoleBindings of the team's
// namespace, as an imported team's are.
func TestMembersAreShownOnlyToWhoMayListRoleBindings(t *testing.T) {
	f := newFixture(t, 0, 0).withProxy()
	s := f.settings
	secret := domain.Member{Kind: "Group", Name: "secret-incident-response"}
	team := domain.Team{Name: "m", Enabled: true, FairShareWeight: 10, Preemption: domain.PreemptLowerPriority,
		Lending: domain.LendAndBorrow, BorrowLimitPercent: 50, Members: []domain.Member{{Kind: "User", Name: "alice@corp.example"}, secret}}
	f.cluster.addTeam(s, team)
	before := team
	before.Members = before.Members[:1]
	f.cluster.teamRevisions = map[string][]domain.TeamRevision{"m": {
		{Revision: 2, At: time.Now(), By: "admin", Action: domain.ActionUpdate, Allocation: team},
		{Revision: 1, At: time.Now().Add(-time.Hour), By: "admin", Action: domain.ActionCreate, Allocation: before}}}
	f.access.grant("viewer", listClusterQueues)
	f.access.grant("auditor", listClusterQueues, kueue.Permission{Verb: "list", Group: "rbac.authorization.k8s.io", Resource: "rolebindings"})
	h := f.handler()

	for _, path := range []string{"/teams/m/edit", "/teams/m/history"} {
		code, body := user(t, h, "viewer").Get(path)
		if code != http.StatusOK {
			t.Fatalf("the viewer's %s: %d", path, code)
		}
		webtest.MustNotContain(t, "the viewer's "+path, body, "alice@corp.example", secret.Name)
		_, body = user(t, h, "auditor").Get(path)
		webtest.MustContain(t, "the auditor's "+path, body, secret.Name)
	}
}
