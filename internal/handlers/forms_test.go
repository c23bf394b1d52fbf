package handlers_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/internal/write"
)

// forms are every state-changing form of the console: its path and a body
// that passes the form's parsing.
var forms = map[string]struct {
	path string
	body url.Values
}{
	"create team":      {"/teams", webtest.TeamForm("newcomer", "1")},
	"edit team":        {"/teams/team-001", webtest.TeamForm("team-001", "6")},
	"delete team":      {"/teams/team-001/delete", url.Values{}},
	"save policy":      {"/policy", url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"}, "class.0.name": {"high"}, "class.0.weight": {"10"}}},
	"roll back team":   {"/teams/team-001/history/1/rollback", url.Values{}},
	"order every team": {"/policy/recent-use", url.Values{"order": {"recent-use"}, "previewed": {"team-000, team-001"}}},
	"roll back policy": {"/policy/history/1/rollback", url.Values{}},
	"re-apply team":    {"/teams/team-001/drift/reapply", url.Values{}},
	"adopt edits":      {"/teams/team-001/drift/adopt", url.Values{"adopt": {"fingerprint"}}},
	"re-apply policy":  {"/policy/drift/reapply", url.Values{}},
	"import queues":    {"/queues/import", url.Values{"queue": {"cluster-queue"}, "fingerprint": {"fp-cluster-queue"}}},
	"release queue":    {"/queues/cluster-queue/release", url.Values{}},
	"save cohort":      {"/cohorts", url.Values{"suffix": {"research"}, "parent": {"shared-pool"}}},
	"delete cohort":    {"/cohorts/shared-pool-research/delete", url.Values{}},
}

// Every outcome of the write path gets the same answer on every form: the
// same status, the page again with the outcome's words, after a save a
// redirect; and each change is asked for the signed-in user.
func TestEveryFormAnswersAnOutcomeTheSameWay(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	f.access.grant("admin", listClusterQueues, editTeams, deleteTeams, editPolicy)
	h := f.handler()
	outcomes := map[string]struct {
		outcome write.Outcome
		status  int
	}{
		"rejected":    {write.Outcome{Kind: write.Rejected, Message: "Kueue refused this allocation."}, http.StatusUnprocessableEntity},
		"conflict":    {write.Outcome{Kind: write.Conflict, Message: "Someone changed it at the same time."}, http.StatusConflict},
		"forbidden":   {write.Outcome{Kind: write.Forbidden, Message: "You may not change it."}, http.StatusForbidden},
		"unavailable": {write.Outcome{Kind: write.Unavailable, Message: "The cluster could not be reached."}, http.StatusServiceUnavailable},
	}
	admin := user(t, h, "admin")
	for name, o := range outcomes {
		f.writes.outcome = &o.outcome
		for form, post := range forms {
			admin.Get("/teams/new") // the CSRF token
			code, _, body := admin.Post(post.path, post.body)
			if code != o.status {
				t.Errorf("%s on %s: %d, want %d\n%.300s", name, form, code, o.status, body)
				continue
			}
			if !strings.Contains(body, `id="apply-error"`) || !strings.Contains(body, o.outcome.Message) {
				t.Errorf("%s on %s: the page does not say %q in its apply error\n%.300s", name, form, o.outcome.Message, body)
			}
		}
	}
	f.writes.outcome = &write.Outcome{Kind: write.NotFound, Message: "There is no such team."}
	for form, post := range forms {
		admin.Get("/teams/new")
		if code, _, body := admin.Post(post.path, post.body); code != http.StatusNotFound || !strings.Contains(body, "There is no such team.") {
			t.Errorf("not found on %s: %d\n%.300s", form, code, body)
		}
	}
	f.writes.outcome = nil
	admin.Get("/teams/new")
	if code, location, _ := admin.Post("/teams", webtest.TeamForm("newcomer", "1")); code != http.StatusSeeOther || location != "/teams?saved=newcomer" {
		t.Errorf("a saved create: %d %q", code, location)
	}
	for _, call := range f.writes.made() {
		if !strings.HasSuffix(call, " by admin") {
			t.Errorf("%q was not asked for the signed-in user", call)
		}
	}
}

// Without the CSRF token (or with a wrong one, or from another site) a POST is
// refused with 403 and reaches no write; with it, it goes through.
func TestPostWithoutCSRFTokenIsRejected(t *testing.T) {
	f := newFixture(t, 2, 0)
	b := webtest.NewBrowser(t, f.handler(), nil)
	code, body := b.Get("/teams/new")
	if code != http.StatusOK || b.CSRF == "" || b.Cookies["quota_console_browser"] == nil {
		t.Fatalf("GET /teams/new: %d, token %q, cookies %v", code, b.CSRF, b.Cookies)
	}
	webtest.MustContain(t, "the form", body, `<input type="hidden" name="_csrf" value="`+b.CSRF+`">`, `id="no-sign-in"`)

	refused := map[string]func() (int, string){
		"no token": func() (int, string) {
			r := httptest.NewRequest(http.MethodPost, "/teams", strings.NewReader(webtest.TeamForm("forged", "2").Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			rec := b.Do(r)
			return rec.Code, rec.Body.String()
		},
		"wrong token": func() (int, string) {
			form := webtest.TeamForm("forged", "2")
			form.Set("_csrf", strings.Repeat("x", len(b.CSRF)))
			code, _, body := b.Post("/teams", form)
			return code, body
		},
		"other site": func() (int, string) {
			b.Headers["Sec-Fetch-Site"] = "cross-site"
			defer delete(b.Headers, "Sec-Fetch-Site")
			code, _, body := b.Post("/teams", webtest.TeamForm("forged", "2"))
			return code, body
		},
	}
	for name, post := range refused {
		if code, body := post(); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Errorf("%s: %d %q, want 403 about CSRF", name, code, body)
		}
	}
	for form, post := range forms {
		r := httptest.NewRequest(http.MethodPost, post.path, strings.NewReader(post.body.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if rec := b.Do(r); rec.Code != http.StatusForbidden {
			t.Errorf("%s without a token: %d, want 403", form, rec.Code)
		}
	}
	if made := f.writes.made(); len(made) != 0 {
		t.Errorf("refused posts reached the write path: %v", made)
	}
	if code, location, body := b.Post("/teams", webtest.TeamForm("genuine", "2")); code != http.StatusSeeOther || location != "/teams?saved=genuine" {
		t.Errorf("with the token: %d %q\n%s", code, location, body)
	}
	if diff := cmp.Diff([]string{"save team genuine by "}, f.writes.made()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// A page on a sibling subdomain (x.apps.example.com next to
// quota.apps.example.com) plants _csrf=t for the parent domain and
// auto-submits POST /teams/<team>/delete with _csrf=t, with the admin's
// session (here: the proxy's headers, which the admin's browser would get
// from the proxy's own cookie).
func TestFormFromAnotherSiteCannotDeleteATeam(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	f.access.grant("admin", listClusterQueues, editTeams, deleteTeams)
	h := f.handler()
	for _, site := range []string{"same-site", "cross-site"} {
		attacker := user(t, h, "admin") // the admin's identity, none of the page's cookies
		attacker.Cookies["_csrf"] = &http.Cookie{Name: "_csrf", Value: "t"}
		attacker.Cookies["quota_console_browser"] = &http.Cookie{Name: "quota_console_browser", Value: strings.Repeat("t", 24)}
		attacker.Headers["Sec-Fetch-Site"] = site
		attacker.Headers["Origin"] = "http://x.apps.example.com"
		if code, _, body := attacker.Post("/teams/team-001/delete", url.Values{"_csrf": {"t"}}); code != http.StatusForbidden {
			t.Errorf("%s form: %d, want 403\n%.300s", site, code, body)
		}
	}
	if made := f.writes.made(); len(made) != 0 {
		t.Errorf("the forged form reached the write path: %v", made)
	}
}

// ?deleted=<anything> made the console say "Team <anything> deleted.";
// only the change itself sets a message, shown once.
func TestFlashMessagesAreNotTakenFromTheURL(t *testing.T) {
	f := newFixture(t, 2, 0)
	b := webtest.NewBrowser(t, f.handler(), nil)
	for _, q := range []string{"deleted", "saved"} {
		_, body := b.Get("/teams?" + q + "=" + url.QueryEscape("Pwned: call +1 555 0100"))
		webtest.MustNotContain(t, "/teams?"+q, body, "Pwned", "555")
	}
	_, body := b.Get("/policy?saved=1")
	webtest.MustNotContain(t, "/policy?saved=1", body, "save the policy done.")
	code, location, _ := b.Post("/teams", webtest.TeamForm("flashed", "1"))
	if code != http.StatusSeeOther {
		t.Fatalf("create: %d", code)
	}
	_, body = b.Get(location)
	webtest.MustContain(t, "the page after a save", body, "save team flashed done.")
	_, body = b.Get(location)
	webtest.MustNotContain(t, "the page loaded again", body, "save team flashed done.")
}

// The sign-in page of token mode is served; the other modes have none.
func TestSignInPageOnlyInTokenMode(t *testing.T) {
	f := newFixture(t, 1, 0)
	if code, _ := webtest.Get(t, f.handler(), auth.SignInPath); code != http.StatusNotFound {
		t.Errorf("GET %s in auth mode none: %d, want 404", auth.SignInPath, code)
	}
	f.cfg.Auth = &auth.Authenticator{Mode: auth.ModeToken, Sessions: auth.NewSessions(auth.RandomKeys(), auth.SessionTTL, nil)}
	code, body := webtest.Get(t, f.handler(), auth.SignInPath+"?next=%2Fteams")
	if code != http.StatusOK {
		t.Fatalf("GET %s in token mode: %d", auth.SignInPath, code)
	}
	webtest.MustContain(t, "the sign-in page", body, `id="sign-in-form"`, `name="token"`, `name="next" value="/teams"`)
}

// tokenReviewer accepts one token, as the apiserver's TokenReview would.
type tokenReviewer struct{ token, user string }

func (r tokenReviewer) Review(_ context.Context, token string) (auth.User, error) {
	if token != r.token {
		return auth.User{}, auth.ErrTokenRejected
	}
	return auth.User{Name: r.user}, nil
}

// Attack: a sign-in link or form that carries the token in its URL
// (/auth/sign-in?token=…), which access logs, browser history and Referer
// headers keep. The token is read from the form's body only.
func TestSignInTakesTheTokenFromTheBodyOnly(t *testing.T) {
	f := newFixture(t, 1, 0)
	f.cfg.Auth = &auth.Authenticator{Mode: auth.ModeToken, Sessions: auth.NewSessions(auth.RandomKeys(), auth.SessionTTL, nil),
		Tokens: tokenReviewer{token: "alice-token", user: "alice"}}
	h := f.handler()
	b := webtest.NewBrowser(t, h, map[string]string{"Sec-Fetch-Site": "same-origin"})
	code, _, body := b.Post(auth.SignInPath+"?token=alice-token", url.Values{"next": {"/"}})
	if code != http.StatusUnauthorized || b.Cookies[auth.SessionCookie] != nil {
		t.Errorf("the token in the URL: %d, cookies %v, want 401 and no session\n%.300s", code, b.Cookies, body)
	}
	if code, location, _ := b.Post(auth.SignInPath, url.Values{"next": {"/"}, "token": {"alice-token"}}); code != http.StatusSeeOther || location != "/" {
		t.Errorf("the token in the form: %d → %q, want 303 to /", code, location)
	}
}
