package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/cluster"
	"github.com/openquota/console/web/templates"
)

// ContentSecurityPolicy allows only the console's own scripts, styles and
// images (no inline script or style attribute), and no framing.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; form-action 'self'"

// MaxBodyBytes bounds a request body (forms are a few KiB).
const MaxBodyBytes = 1 << 20

// securityHeaders sets the headers every answer carries.
func securityHeaders(secure func(*http.Request) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Response().Header()
			h.Set("Content-Security-Policy", ContentSecurityPolicy)
			h.Set(echo.HeaderXContentTypeOptions, "nosniff")
			h.Set(echo.HeaderXFrameOptions, "DENY")
			h.Set(echo.HeaderReferrerPolicy, "same-origin")
			if secure(c.Request()) {
				h.Set(echo.HeaderStrictTransportSecurity, "max-age=31536000")
			}
			return next(c)
		}
	}
}

// isPublic are the paths served without sign-in: probes, metrics, static
// files and the sign-in page itself.
func isPublic(c echo.Context) bool {
	return isProbeOrStatic(c) || c.Request().URL.Path == auth.SignInPath
}

// isProbeOrStatic are the paths no form posts to.
func isProbeOrStatic(c echo.Context) bool {
	p := c.Request().URL.Path
	switch p {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return strings.HasPrefix(p, "/static/")
}

func (d Deps) secure(r *http.Request) bool { return d.Auth.Secure(r) }

// viewerContext is the request context with what the page frame and forms
// need: the auth mode, the signed-in user and the CSRF token.
func viewerContext(c echo.Context) context.Context {
	u := auth.From(c)
	return templates.WithViewer(c.Request().Context(), templates.Viewer{
		Mode: string(auth.ModeFrom(c)), Name: u.Name, Groups: u.Groups, CSRF: auth.CSRFTokenOf(c),
	})
}

// signInRoutes serve the token mode's sign-in and sign-out.
func (d Deps) signInRoutes(e *echo.Echo) {
	e.GET(auth.SignInPath, func(c echo.Context) error {
		if auth.From(c).SignedIn() {
			return c.Redirect(http.StatusSeeOther, auth.SafeNext(c.QueryParam("next")))
		}
		return d.renderSignIn(c, http.StatusOK, auth.SafeNext(c.QueryParam("next")), "")
	})
	e.POST(auth.SignInPath, func(c echo.Context) error {
		next := auth.SafeNext(c.FormValue("next"))
		u, err := d.Auth.SignIn(c, c.FormValue("token"))
		switch {
		case errors.Is(err, auth.ErrTooManySignIns):
			c.Response().Header().Set("Retry-After", "10")
			return d.renderSignIn(c, http.StatusTooManyRequests, next, "Too many sign-in attempts from your address: wait a few seconds and try again.")
		case errors.Is(err, auth.ErrSessionTooLarge):
			return d.renderSignIn(c, http.StatusUnprocessableEntity, next, "Your account is in too many groups for the console to keep in a session cookie. Ask a platform admin to run the console with --auth proxy.")
		case errors.Is(err, auth.ErrTokenRejected):
			return d.renderSignIn(c, http.StatusUnauthorized, next, "The cluster did not accept this token: it is unknown, expired or revoked. Nothing was kept.")
		case err != nil:
			d.Log.Error("sign-in", "err", err)
			return d.renderSignIn(c, http.StatusBadGateway, next, "The cluster could not check the token right now; try again in a moment.")
		}
		d.Log.Info("signed in", "user", u.Name, "groups", u.Groups)
		return c.Redirect(http.StatusSeeOther, next)
	})
	e.POST(auth.SignOutPath, func(c echo.Context) error {
		if err := d.Auth.SignOut(c); err != nil {
			d.Log.Error("sign-out: the session could not be revoked on every replica", "err", err)
		}
		return c.Redirect(http.StatusSeeOther, auth.SignInPath)
	})
}

func (d Deps) renderSignIn(c echo.Context, status int, next, msg string) error {
	return render(c, status, templates.SignIn(templates.SignInView{
		Page: templates.Page{Title: "Sign in", Active: ""}, Next: next, Error: msg,
	}))
}

// writer returns the Applier for this request's writes, and sets the
// signed-in user as the actor of the changes on the request's context. In
// proxy and token mode its clients impersonate the user, so Kubernetes RBAC
// decides what they may change; in mode none it is the console's own.
func (d Deps) writer(c echo.Context) (cluster.Applier, context.Context, error) {
	u := auth.From(c)
	ctx := cluster.WithActor(c.Request().Context(), u.Name)
	c.SetRequest(c.Request().WithContext(ctx))
	if !d.Auth.Impersonates() {
		return d.Applier, ctx, nil
	}
	kube, kq, err := d.clientsAs(u)
	if err != nil {
		return cluster.Applier{}, ctx, err
	}
	return d.Applier.As(kube, kq), ctx, nil
}

// clientsAs builds clients that act as u (Kubernetes impersonation). They
// share the console's connections: client-go caches transports by TLS config.
func (d Deps) clientsAs(u auth.User) (kubernetes.Interface, kueueclient.Interface, error) {
	cfg, err := d.configAs(u)
	if err != nil {
		return nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	kq, err := kueueclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return kube, kq, nil
}

// configAs is the console's client config, impersonating u.
func (d Deps) configAs(u auth.User) (*rest.Config, error) {
	if d.RESTConfig == nil {
		return nil, errors.New("handlers: Deps.RESTConfig is required in proxy and token auth modes")
	}
	if !u.SignedIn() {
		return nil, errors.New("handlers: no signed-in user to act as")
	}
	cfg := rest.CopyConfig(d.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: u.Name, Groups: u.Groups}
	return cfg, nil
}

// forbidden reports whether a write failed because Kubernetes refused the
// user, and explains it in words. A refusal of the console's own
// impersonation is the operator's problem, not the user's, and says so.
func (d Deps) forbidden(c echo.Context, err error, what string) (string, bool) {
	if !apierrors.IsForbidden(err) {
		return "", false
	}
	var status apierrors.APIStatus
	detail := err.Error()
	if errors.As(err, &status) {
		detail = status.Status().Message
	}
	if isWebhookDenial(detail) {
		return "", false // Kueue refused the values, not the user: explainWriteError says so
	}
	if strings.Contains(detail, "cannot impersonate") {
		return "The console is not allowed to act on your behalf (Kubernetes impersonation), so nothing was changed. " +
			"Ask a cluster admin to apply the console's RBAC from deploy/rbac. The cluster said: " + detail + ".", true
	}
	who := "the console's own account"
	if u := auth.From(c); u.SignedIn() {
		who = "your account " + u.Name
	}
	return fmt.Sprintf("You may not change %s: %s is not allowed to make this change in the cluster, so nothing was changed. "+
		"Ask a platform admin for the quota-console-admin role. The cluster said: %s.", what, who, detail), true
}

// Permission checks for the forms, as the user: a SelfSubjectAccessReview,
// answered from a cache for accessTTL.
const (
	accessTTL        = 30 * time.Second
	accessUnknownTTL = 5 * time.Second
	accessTimeout    = 3 * time.Second
)

// permission is one thing a page or form needs the user to be allowed.
type permission struct {
	Verb, Group, Resource, Namespace string
	What                             string // "change ClusterQueues", for the note
}

var (
	mayEditTeams   = permission{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "clusterqueues", What: "change ClusterQueues"}
	mayDeleteTeams = permission{Verb: "delete", Group: "kueue.x-k8s.io", Resource: "clusterqueues", What: "delete ClusterQueues"}
	mayEditPolicy  = permission{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "workloadpriorityclasses", What: "change WorkloadPriorityClasses"}
)

type accessKey struct {
	user, groups string
	perm         permission
}

type accessAnswer struct {
	allowed, known bool
	until          time.Time
}

// accessCache answers "may this user do that?" with SelfSubjectAccessReviews
// made as the user, and remembers answers for accessTTL.
type accessCache struct {
	clientFor func(auth.User) (kubernetes.Interface, error)
	now       func() time.Time

	mu      sync.Mutex
	answers map[accessKey]accessAnswer
}

func newAccessCache(clientFor func(auth.User) (kubernetes.Interface, error)) *accessCache {
	return &accessCache{clientFor: clientFor, now: time.Now, answers: map[accessKey]accessAnswer{}}
}

// allowed asks the cluster (or the cache). known is false when the cluster
// could not answer; then the form stays enabled and the cluster decides on
// save.
func (a *accessCache) allowed(ctx context.Context, u auth.User, p permission) (allowed, known bool) {
	key := accessKey{user: u.Name, groups: strings.Join(u.Groups, "\x00"), perm: p}
	now := a.now()
	a.mu.Lock()
	if ans, ok := a.answers[key]; ok && now.Before(ans.until) {
		a.mu.Unlock()
		return ans.allowed, ans.known
	}
	a.mu.Unlock()

	ans := accessAnswer{until: now.Add(accessUnknownTTL)}
	if client, err := a.clientFor(u); err == nil && client != nil {
		ctx, cancel := context.WithTimeout(ctx, accessTimeout)
		defer cancel()
		res, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
				Verb: p.Verb, Group: p.Group, Resource: p.Resource, Namespace: p.Namespace,
			}},
		}, metav1.CreateOptions{})
		if err == nil {
			ans = accessAnswer{allowed: res.Status.Allowed, known: true, until: now.Add(accessTTL)}
		}
	}
	a.mu.Lock()
	a.answers[key] = ans
	for k, v := range a.answers { // keep the cache small: drop what expired
		if !now.Before(v.until) {
			delete(a.answers, k)
		}
	}
	a.mu.Unlock()
	return ans.allowed, ans.known
}

// readOnly says why the user may not use a form, or "" when they may (or
// when the cluster could not say: then it decides on save).
func (d Deps) readOnly(c echo.Context, p permission) string {
	if d.access == nil {
		return ""
	}
	u := auth.From(c)
	allowed, known := d.access.allowed(c.Request().Context(), u, p)
	if allowed || !known {
		return ""
	}
	who := "The console's own Kubernetes account"
	if u.SignedIn() {
		who = "Your account " + u.Name
	}
	return fmt.Sprintf("%s may not %s in this cluster, so this form is read-only. "+
		"Ask a platform admin for the quota-console-admin role to make changes.", who, p.What)
}

// accessClient is the client SelfSubjectAccessReviews are made with: the
// user's (impersonated) in proxy and token mode, the console's own in mode none.
func (d Deps) accessClient(u auth.User) (kubernetes.Interface, error) {
	if !d.Auth.Impersonates() {
		if d.Applier.Kube == nil {
			return nil, errors.New("no Kubernetes client")
		}
		return d.Applier.Kube, nil
	}
	cfg, err := d.configAs(u)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
