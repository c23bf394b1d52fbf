package app_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// fault is what the apiserver answers every write with (dry runs
// included), as a proxy in front of it makes it answer.
type fault struct {
	code    int
	status  metav1.Status // "" Kind: not a Kubernetes Status (an unreachable cluster)
	says    string        // what the form's page must say
	outcome int           // the status every form answers
}

var faults = map[string]fault{
	"forbidden": {code: 403, status: metav1.Status{Status: "Failure", Reason: metav1.StatusReasonForbidden, Code: 403,
		Message: `clusterqueues.kueue.x-k8s.io is forbidden: User "x" cannot patch resource "clusterqueues"`},
		says: "You may not change", outcome: http.StatusForbidden},
	"webhook rejection": {code: 403, status: metav1.Status{Status: "Failure", Reason: metav1.StatusReasonForbidden, Code: 403,
		Message: `admission webhook "vclusterqueue.kb.io" denied the request: spec.resourceGroups[0]: Invalid value`},
		says: "Kueue refused this allocation", outcome: http.StatusUnprocessableEntity},
	"conflict": {code: 409, status: metav1.Status{Status: "Failure", Reason: metav1.StatusReasonConflict, Code: 409,
		Message: `Operation cannot be fulfilled: the object has been modified`},
		says: "at the same time", outcome: http.StatusConflict},
	"unavailable": {code: 502, says: "could not be reached", outcome: http.StatusServiceUnavailable},
}

// A refusal, a webhook rejection, a conflict and an unavailable cluster
// each get the same answer on every form: the same status, the page again
// with the same words, nothing changed.
func TestEveryFormAnswersAnOutcomeTheSameWay(t *testing.T) {
	env := sandboxtest.Env(t)
	target, err := url.Parse(env.APIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	var current atomic.Pointer[fault]
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // loopback test
	proxy.FlushInterval = -1                                                                  // stream watches
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := current.Load()
		write := r.Method != http.MethodGet && !strings.Contains(r.URL.Path, "accessreviews")
		if f == nil || !write {
			proxy.ServeHTTP(w, r)
			return
		}
		if f.status.Code == 0 {
			http.Error(w, "bad gateway", f.code) // not the apiserver's answer
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.code)
		st := f.status
		st.Kind, st.APIVersion = "Status", "v1"
		_ = json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	c := newConsoleWith(t, func(cfg *rest.Config) {
		cfg.Host = srv.URL
		cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true}
	}, nil)
	t.Cleanup(func() { current.Store(nil); cleanupTeams(c) })

	// What the forms act on, made while the cluster answers.
	for _, team := range []string{"subject", "drifting"} {
		if code, _, body := c.post(t, "/teams", webtest.TeamForm(team, "2")); code != 303 {
			t.Fatalf("create %s: %d\n%.300s", team, code, body)
		}
	}
	if code, _, body := c.post(t, "/teams/subject", webtest.TeamForm("subject", "4")); code != 303 { // revision 2
		t.Fatalf("edit: %d\n%.300s", code, body)
	}
	policy := url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FirstComeFirstServe"},
		"class.0.name": {"o-" + c.settings.Cohort}, "class.0.weight": {"10"}}
	if code, _, body := c.post(t, "/policy", policy); code != 303 {
		t.Fatalf("policy: %d\n%.300s", code, body)
	}
	policy.Set("class.0.weight", "20")
	if code, _, body := c.post(t, "/policy", policy); code != 303 {
		t.Fatalf("policy again: %d\n%.300s", code, body)
	}
	c.handEdit(t, "drifting", gpusAndHold)
	fingerprint := webtest.Hidden(t, c.eventually(t, "/teams/drifting/drift", `name="adopt"`), "adopt")

	forms := map[string]func() (int, string){
		"create team": func() (int, string) {
			code, _, body := c.post(t, "/teams", webtest.TeamForm("newcomer", "1"))
			return code, body
		},
		"edit team": func() (int, string) {
			code, _, body := c.post(t, "/teams/subject", webtest.TeamForm("subject", "6"))
			return code, body
		},
		"delete team": func() (int, string) {
			code, _, body := c.post(t, "/teams/subject/delete", url.Values{})
			return code, body
		},
		"save policy": func() (int, string) { code, _, body := c.post(t, "/policy", policy); return code, body },
		"roll back team": func() (int, string) {
			code, _, body := c.post(t, "/teams/subject/history/1/rollback", nil)
			return code, body
		},
		"roll back policy": func() (int, string) {
			code, _, body := c.post(t, "/policy/history/1/rollback", nil)
			return code, body
		},
		"re-apply team": func() (int, string) {
			code, _, body := c.post(t, "/teams/drifting/drift/reapply", nil)
			return code, body
		},
		"adopt edits": func() (int, string) {
			code, _, body := c.post(t, "/teams/drifting/drift/adopt", url.Values{"adopt": {fingerprint}})
			return code, body
		},
		"re-apply policy": func() (int, string) { code, _, body := c.post(t, "/policy/drift/reapply", nil); return code, body },
	}
	for name, f := range faults {
		current.Store(&f)
		for form, post := range forms {
			code, body := post()
			if code != f.outcome {
				t.Errorf("%s on %s: %d, want %d\n%.300s", name, form, code, f.outcome, body)
				continue
			}
			if !strings.Contains(body, `id="apply-error"`) || !strings.Contains(body, f.says) {
				t.Errorf("%s on %s: the page does not say %q in its apply error\n%.300s", name, form, f.says, body)
			}
		}
	}
	current.Store(nil)
	if nominal, _ := gpuQuota(c.clusterQueue(t, "subject")); nominal.Value() != 4 {
		t.Errorf("a refused change changed the team: %s GPUs", &nominal)
	}
}
