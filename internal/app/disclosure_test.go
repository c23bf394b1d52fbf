package app_test

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/app"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
)

// memberConsole is a console in proxy mode on the sandbox, reading history
// from st, with two teams an admin created: the first has member as its
// one user, the second no member.
func memberConsole(t *testing.T, st *taskhistory.Store, member string, teams ...string) *taskHistoryConsole {
	t.Helper()
	s := taskHistorySettings()
	proxy := proxyAuth()
	var history handlers.TaskHistory
	if st != nil {
		history = storeTaskHistory(st)
	}
	hc := startTaskHistoryConsole(t, s, history, nil, func(d *handlers.Config) { d.Auth = proxy })
	t.Cleanup(func() { cleanupTeams(hc.console) })
	admin := hc.as(t, bindUser(t, hc.kube, "admin", rbac.AdminRole), "platform")
	admin.Get("/teams/new")
	for i, team := range teams {
		f := webtest.TeamForm(team, "2")
		f.Set("users", "")
		if i == 0 {
			f.Set("users", member)
		}
		f.Set("groups", "")
		if code, _, body := admin.Post("/teams", f); code != http.StatusSeeOther {
			t.Fatalf("create %s: %d\n%.500s", team, code, body)
		}
	}
	waitAllowed(t, hc.kube, member, s.Namespace(teams[0]))
	return hc
}

// A member of team A opened /preemptions: a preemption of A's task by a
// task of team B, which they may not see, named B's task (namespace, name,
// UID) on the page, in the CSV and in Kueue's message (the preemptor's UID
// and JobUID). They now see B's team and class only; a platform viewer
// still sees the task.
func TestPreemptorOfATeamTheViewerMayNotSeeIsNotNamed(t *testing.T) {
	forEachTaskHistoryStore(t, func(t *testing.T, hs taskHistoryStore) {
		st := hs.open(t)
		id := rand.String(4)
		victim, taker, member := "victim-"+id, "taker-"+id, "member-"+rand.String(5)
		hc := memberConsole(t, st, member, victim, taker)
		s := hc.settings

		now := time.Now().UTC().Truncate(time.Second)
		secretName, secretUID, secretJob := "urgent-secret-"+id, "uid-secret-"+id, "job-secret-"+id
		msg := fmt.Sprintf("Preempted to accommodate a workload (UID: %s, JobUID: %s) due to reclamation within the cohort; preemptor path: /%s/%s; preemptee path: /%s/%s",
			secretUID, secretJob, s.Cohort, s.ClusterQueue(taker), s.Cohort, s.ClusterQueue(victim))
		preemptor := taskhistory.Task{UID: secretUID, Namespace: s.Namespace(taker), Name: secretName, Team: taker, Class: "high",
			ClusterQueue: s.ClusterQueue(taker), Created: now.Add(-time.Hour), WaitStart: now.Add(-time.Hour), State: domain.TaskAdmitted}
		preempted := taskhistory.Task{UID: "uid-victim-" + id, Namespace: s.Namespace(victim), Name: "big-" + id, Team: victim, Class: "low",
			ClusterQueue: s.ClusterQueue(victim), Created: now.Add(-2 * time.Hour), WaitStart: now.Add(-2 * time.Hour), State: domain.TaskPreempted}
		_, err := st.Write(context.Background(), taskhistory.Batch{Changes: []taskhistory.Change{{Task: preemptor}, {Task: preempted, Events: []taskhistory.Event{
			{Kind: taskhistory.EventAdmitted, At: now.Add(-time.Hour), ClusterQueue: s.ClusterQueue(victim),
				Usage: []taskhistory.FlavorUsage{{Flavor: "ml.p5.48xlarge", Amount: taskhistory.Resources{GPUs: 2}}}},
			{Kind: taskhistory.EventPreempted, At: now.Add(-10 * time.Minute), ClusterQueue: s.ClusterQueue(victim), Reason: "InCohortReclamation",
				ReasonWords: "Preempted: " + taker + " reclaimed its lent quota", Message: msg,
				Preemptor: taskhistory.Preemptor{UID: secretUID, JobUID: secretJob, ClusterQueue: s.ClusterQueue(taker)}},
		}}}})
		if err != nil {
			t.Fatal(err)
		}
		victimKey := preempted.Namespace + "/" + preempted.Name

		b := hc.as(t, member)
		code, page := b.Get("/preemptions")
		row, ok := webtest.HTMLRows(t, page, "preemptions", webtest.ByAttr("data-task"))[victimKey]
		if code != http.StatusOK || !ok {
			t.Fatalf("the member does not see the preemption of their own team's task: %d\n%.800s", code, page)
		}
		webtest.MustNotContain(t, "the member's /preemptions", page, secretName, secretUID, secretJob)
		// A page cursor edited by hand shows the first page, not an
		// unavailable history.
		for _, path := range []string{"/preemptions?after=garbage", "/reports/usage?source=history&after=garbage"} {
			code, page := b.Get(path)
			if code != http.StatusOK || strings.Contains(page, "task history is unavailable") {
				t.Errorf("GET %s: %d\n%.400s", path, code, page)
			}
		}
		if !strings.Contains(strings.Join(row, "|"), taker+"|high") {
			t.Errorf("the member's row does not name the preemptor's team and class: %q", row)
		}
		code, body := b.Get("/preemptions?format=csv")
		if code != http.StatusOK {
			t.Fatalf("the member's CSV: %d\n%.500s", code, body)
		}
		webtest.MustNotContain(t, "the member's preemptions CSV", body, secretName, secretUID, secretJob)
		records, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil || len(records) != 2 {
			t.Fatalf("the member's CSV: %v\n%s", err, body)
		}
		got := map[string]string{}
		for i, h := range records[0] {
			got[h] = records[1][i]
		}
		if got["Preemptor team"] != taker || got["Preemptor class"] != "high" {
			t.Errorf("the member's CSV names preemptor team %q, class %q; want %s, high", got["Preemptor team"], got["Preemptor class"], taker)
		}

		// A platform viewer sees the preemptor task.
		viewer := hc.as(t, bindUser(t, hc.kube, "viewer", rbac.ViewerRole))
		_, page = viewer.Get("/preemptions")
		webtest.MustContain(t, "a viewer's /preemptions", page, secretName)
		_, body = viewer.Get("/preemptions?format=csv")
		webtest.MustContain(t, "a viewer's preemptions CSV", body, secretName, secretUID)
	})
}

// The 403 page named the team of the request's path as it came: a link
// with a team name of kilobytes (or with quotes and line breaks) put all of
// it on the page twice. It is quoted and shortened now.
func TestForbiddenTeamNameIsQuotedAndShort(t *testing.T) {
	id := rand.String(4)
	member := "member-" + rand.String(5)
	hc := memberConsole(t, nil, member, "mine-"+id)
	long := strings.Repeat("evil", 1000)
	code, body := hc.as(t, member).Get("/usage/" + long)
	if code != http.StatusForbidden {
		t.Fatalf("GET /usage/<4000 characters> as a member of another team = %d, want 403", code)
	}
	if strings.Contains(body, strings.Repeat("evil", 20)) {
		t.Errorf("the 403 page repeats the team name of the path at length (%d bytes)", len(body))
	}
	webtest.MustContain(t, "the 403 page", html.UnescapeString(body), `"evilevil`, `…"`)
}

// A task history that cannot be read put its error on every page built on
// it, for every viewer: the database server's name and address, its user
// and driver. The pages now say the history is unavailable in a plain
// sentence, and the error goes to the log.
func TestTaskHistoryErrorsStayInTheLog(t *testing.T) {
	s := taskHistorySettings()
	secret := "task history store postgres://db.internal.example:5432/quota_console: failed to connect to `user=console database=quota_console`: dial tcp 10.1.2.3:5432: connect: connection refused"
	hc := startTaskHistoryConsole(t, s, app.NewTaskHistory(nil, errors.New(secret)), nil, nil)
	t.Cleanup(func() { cleanupTeams(hc.console) })
	team := "dsn-" + rand.String(4)
	createTeam(t, hc.console, webtest.TeamForm(team, "2"))
	for _, path := range []string{"/tasks", "/preemptions", "/preemptions?format=csv", "/reports/usage?source=history",
		"/reports/usage?source=history&format=csv&table=summary", "/reports/usage?source=history&format=csv&table=tasks", "/usage/" + team} {
		_, body := hc.get(t, path)
		webtest.MustNotContain(t, path, body, "db.internal.example", "10.1.2.3", "user=console", "dial tcp")
		webtest.MustContain(t, path, body, "The task history is unavailable right now.")
	}
}
