package app_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/internal/webtest"
)

// request sends a request through the handlers, as from the console's own page.
func (c console) request(t *testing.T, method, path, contentType, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin") // as the console's own page
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	return rec
}

// Strings an admin typed into the team form and strings a Workload carries
// come out escaped on every page, and neutralized in CSV exports.
func TestHostileStringsAreEscaped(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	const team = "xss"
	t.Cleanup(func() {
		_ = kueue.Applier{Kube: c.kube, Kueue: c.kueue}.DeleteTeam(context.Background(), c.settings, team)
	})

	description := strings.Join(webtest.HostilePayloads, " ")
	users := strings.Join(webtest.HostilePayloads, "\n")
	groups := strings.Join(webtest.CSVPayloads[:4], "\n") // a tab is not allowed in a name
	f := webtest.TeamForm(team, "2")
	f.Set("enabled", "false") // held: Kueue admits nothing of the test's Workloads
	f.Set("description", description)
	f.Set("users", users)
	f.Set("groups", groups)
	code, location, body := c.post(t, "/teams", f)
	if code != http.StatusSeeOther {
		t.Fatalf("creating a team with hostile description and members: %d %q\n%s", code, location, body)
	}

	// Workloads whose Kueue messages are hostile.
	ns, lq := c.settings.Namespace(team), c.settings.LocalQueue(team)
	messages := map[string]string{}
	for i, m := range append(append([]string{}, webtest.HostilePayloads...), webtest.CSVPayloads...) {
		name := fmt.Sprintf("hostile-%d", i)
		messages[name] = m
		testenv.FinishedWorkload(t, c.kueue, ns, lq, name, m)
	}
	tasksCSV := "/tasks?team=" + team + "&state=all&format=csv&table=tasks"
	var rows map[string]map[string]string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		rows = c.csv(t, tasksCSV)
		for name, m := range messages {
			if r, ok := rows[ns+"/"+name]; !ok || !strings.Contains(r["Kueue message"], strings.TrimSpace(m)) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the tasks CSV never listed the hostile Workloads with their messages: %v", rows)
	}

	// CSV: a cell a spreadsheet would evaluate starts with a quote.
	for name, m := range messages {
		got := rows[ns+"/"+name]["Kueue message"]
		if strings.ContainsRune("=+-@\t\r", rune(m[0])) {
			if got != "'"+m {
				t.Errorf("tasks CSV: message %q exported as %q, want it prefixed with '", m, got)
			}
		} else if got != m {
			t.Errorf("tasks CSV: message %q exported as %q", m, got)
		}
	}
	// Filter values from the URL land in CSV cells too (the class column).
	for _, p := range webtest.CSVPayloads {
		for _, table := range []string{"classes", "breakdown"} {
			path := "/tasks?format=csv&table=" + table + "&state=all&class=" + url.QueryEscape(p)
			rec := c.request(t, http.MethodGet, path, "", "")
			records, err := csv.NewReader(strings.NewReader(rec.Body.String())).ReadAll()
			if rec.Code != http.StatusOK || err != nil {
				t.Fatalf("GET %s: %d, %v", path, rec.Code, err)
			}
			for _, r := range records[1:] {
				for _, cell := range r {
					if cell != "" && strings.ContainsRune("=+@\t\r", rune(cell[0])) {
						t.Errorf("GET %s: formula cell %q", path, cell)
					}
					if strings.HasPrefix(cell, "-") {
						if _, err := strconv.ParseFloat(cell, 64); err != nil {
							t.Errorf("GET %s: formula cell %q", path, cell)
						}
					}
				}
			}
		}
	}

	// HTML: every page, including ones that reflect the URL's values.
	for _, path := range webtest.HostilePages(team) {
		rec := c.request(t, http.MethodGet, path, "", "")
		if rec.Code >= 500 {
			t.Errorf("GET %s: %d\n%s", path, rec.Code, rec.Body.String())
			continue
		}
		ct := rec.Header().Get("Content-Type")
		switch {
		case strings.HasPrefix(ct, "text/html"):
			webtest.CheckNoMarkup(t, "GET "+path, rec.Body.String())
		case strings.HasPrefix(ct, "application/json"):
			for _, p := range webtest.HostilePayloads {
				if strings.ContainsAny(p, "<>&") && strings.Contains(rec.Body.String(), p) {
					t.Errorf("GET %s: JSON carries %q unescaped", path, p)
				}
			}
		case strings.HasPrefix(ct, "text/plain"):
			// Error messages: never rendered as markup.
		default:
			t.Errorf("GET %s: unexpected content type %q", path, ct)
		}
	}

	// The edit form shows the hostile description and members back as text.
	rec := c.request(t, http.MethodGet, "/teams/"+team+"/edit", "", "")
	doc, err := html.Parse(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"description": description, "users": users, "groups": groups} {
		el := webtest.FindNode(doc, func(n *html.Node) bool { return n.Data == "textarea" && webtest.Attr(n, "id") == id })
		if el == nil {
			t.Errorf("edit form has no textarea #%s", id)
			continue
		}
		// The browser drops one newline right after <textarea>.
		if got := strings.TrimPrefix(webtest.NodeText(el), "\n"); got != want {
			t.Errorf("edit form #%s shows %q, want %q", id, got, want)
		}
	}

	// The tasks page shows each message as the tooltip of its row, as text.
	rec = c.request(t, http.MethodGet, "/tasks?team="+team+"&state=all", "", "")
	doc, err = html.Parse(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range messages {
		row := webtest.FindNode(doc, func(n *html.Node) bool { return n.Data == "tr" && webtest.Attr(n, "data-task") == ns+"/"+name })
		if row == nil {
			t.Errorf("tasks page lists no %s", name)
			continue
		}
		why := webtest.FindNode(row, func(n *html.Node) bool { return strings.Contains(webtest.Attr(n, "class"), "why") })
		if why == nil || webtest.Attr(why, "title") != m {
			t.Errorf("tasks page: %s has tooltip %q, want %q", name, webtest.Attr(why, "title"), m)
		}
	}

	// A priority class name can never be hostile: the policy form refuses
	// it and shows it back escaped.
	for _, p := range webtest.HostilePayloads {
		form := url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"},
			"class.0.name": {p}, "class.0.weight": {"50"}}
		code, _, body := c.post(t, "/policy", form)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, `data-error-for="class.0.name"`) {
			t.Errorf("policy with class name %q: %d, want 422 with an error on the name", p, code)
		}
		webtest.CheckNoMarkup(t, "POST /policy with class "+p, body)
	}
}

func checkGarbageRefused(t *testing.T, c console, path, formID string, g webtest.GarbageBody) {
	t.Helper()
	rec := c.request(t, http.MethodPost, path, g.ContentType, g.Body)
	body := rec.Body.String()
	switch {
	case rec.Code >= 500:
		t.Errorf("POST %s (%s): %d, a server error\n%.500s", path, g.Name, rec.Code, body)
	case rec.Code < 400:
		t.Errorf("POST %s (%s): %d, want it refused", path, g.Name, rec.Code)
	case g.Rerendered:
		if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(body, `id="`+formID+`"`) || !strings.Contains(body, `id="form-errors"`) {
			t.Errorf("POST %s (%s): %d, want 422 with the form and its errors\n%.500s", path, g.Name, rec.Code, body)
		}
		webtest.CheckNoMarkup(t, "POST "+path+" ("+g.Name+")", body)
	}
}

// Garbage posted to the forms is refused with a 4xx, the form shown again
// when it can be read, and nothing is written to the cluster.
func TestHostileFormBodiesAreRefused(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	id := rand.String(4)
	t.Cleanup(func() {
		a := kueue.Applier{Kube: c.kube, Kueue: c.kueue}
		for _, team := range []string{"json-team", "good-" + id} {
			_ = a.DeleteTeam(context.Background(), c.settings, team)
		}
		_ = c.kueue.KueueV1beta2().Cohorts().Delete(context.Background(), c.settings.Cohort, metav1.DeleteOptions{})
	})

	t.Run("teams", func(t *testing.T) {
		// A valid team, except for the poisoned field: any write would be
		// a ClusterQueue for "good-<id>".
		base := webtest.TeamForm("good-"+id, "2")
		poison := url.Values{"fairShareWeight": {"101"}}
		rowKey := func(i int) url.Values {
			p := "quota." + strconv.Itoa(i) + "."
			return url.Values{p + "instanceType": {"ml.p5.48xlarge"}, p + "gpus": {"1"}}
		}
		for _, g := range webtest.GarbageBodies(base, rowKey, poison) {
			t.Run(g.Name, func(t *testing.T) { checkGarbageRefused(t, c, "/teams", "team-form", g) })
		}
		// Editing a team that does not exist is a 404, whatever the body.
		for _, g := range webtest.GarbageBodies(base, rowKey, poison)[:3] {
			if rec := c.request(t, http.MethodPost, "/teams/nope-"+id, g.ContentType, g.Body); rec.Code != http.StatusNotFound {
				t.Errorf("POST /teams/nope-%s (%s): %d, want 404", id, g.Name, rec.Code)
			}
		}
		cqs, err := c.kueue.KueueV1beta2().ClusterQueues().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cq := range cqs.Items {
			if strings.HasPrefix(cq.Name, c.settings.NamespacePrefix) {
				t.Errorf("garbageBody wrote ClusterQueue %s", cq.Name)
			}
		}
		nss, err := c.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range nss.Items {
			if strings.HasPrefix(ns.Name, c.settings.NamespacePrefix) {
				t.Errorf("garbageBody wrote namespace %s", ns.Name)
			}
		}
	})

	t.Run("policy", func(t *testing.T) {
		// A valid policy, except for the poisoned field: any write would
		// be the cohort and priority classes "good-<id>-N".
		base := url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"},
			"class.0.name": {"good-" + id + "-0"}, "class.0.weight": {"50"}}
		poison := url.Values{"class.1.name": {"good-" + id + "-1"}, "class.1.weight": {"101"}}
		rowKey := func(i int) url.Values {
			p := "class." + strconv.Itoa(i) + "."
			return url.Values{p + "name": {"good-" + id + "-" + strconv.Itoa(i)}, p + "weight": {"1"}}
		}
		for _, g := range webtest.GarbageBodies(base, rowKey, poison) {
			t.Run(g.Name, func(t *testing.T) { checkGarbageRefused(t, c, "/policy", "policy-form", g) })
		}
		if _, err := c.kueue.KueueV1beta2().Cohorts().Get(ctx, c.settings.Cohort, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("garbageBody wrote the cohort %s (get: %v)", c.settings.Cohort, err)
		}
		wpcs, err := c.kueue.KueueV1beta2().WorkloadPriorityClasses().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wpcs.Items {
			if strings.HasPrefix(w.Name, "good-"+id) {
				t.Errorf("garbageBody wrote WorkloadPriorityClass %s", w.Name)
				_ = c.kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(context.Background(), w.Name, metav1.DeleteOptions{})
			}
		}
	})
}
