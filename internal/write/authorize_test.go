package write

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/openquota/console/internal/kueue"
)

// authorizer is a cluster whose authorizer allows what allow says, and keeps
// the reviews it was asked.
type authorizer struct {
	mu      sync.Mutex
	reviews []authzv1.SubjectAccessReviewSpec
	selfs   int
	fail    bool
}

func (z *authorizer) access(allow func(authzv1.SubjectAccessReviewSpec) bool) *kueue.Access {
	client := k8sfake.NewClientset()
	client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		r := action.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		z.mu.Lock()
		defer z.mu.Unlock()
		if z.fail {
			return true, nil, errors.New("connection refused")
		}
		z.reviews = append(z.reviews, r.Spec)
		r.Status.Allowed = allow(r.Spec)
		return true, r, nil
	})
	client.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		z.mu.Lock()
		defer z.mu.Unlock()
		z.selfs++
		return true, nil, errors.New("the console itself is not asked about")
	})
	return kueue.NewAccess(client)
}

// Before the console writes, the cluster is asked about the signed-in user,
// with every part of their identity, once per request the change makes; one
// denied request refuses the whole change and names what is missing.
func TestChangesAreAuthorizedForTheUserFirst(t *testing.T) {
	perms := []kueue.Permission{
		{Verb: "create", Resource: "namespaces", Name: "hyperpod-ns-x"},
		{Verb: "patch", Resource: "namespaces", Name: "hyperpod-ns-x"},
		{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "clusterqueues", Name: "hyperpod-ns-x-clusterqueue"},
		{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "quota-console-team-member"},
	}
	ch := plan{what: "team x", writes: func(context.Context, kueue.Applier) ([]kueue.Permission, error) { return perms, nil }}
	bob := kueue.Identity{Name: "bob", Groups: []string{"ml", "system:authenticated"}, UID: "u-1",
		Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=1"}}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()

	var z authorizer
	s := Service{Access: z.access(func(r authzv1.SubjectAccessReviewSpec) bool { return r.ResourceAttributes.Resource != "clusterroles" }), Log: log}
	o := s.authorize(ctx, kueue.Applier{}, bob, ch)
	if o.Kind != Forbidden || !strings.Contains(o.Message, "You may not change team x: your account bob") ||
		!strings.HasSuffix(o.Message, "The cluster does not allow you to bind clusterroles.rbac.authorization.k8s.io quota-console-team-member.") {
		t.Errorf("%v %q", o.Kind, o.Message)
	}
	if len(z.reviews) != len(perms) {
		t.Fatalf("%d reviews, want one per request (%d)", len(z.reviews), len(perms))
	}
	for _, r := range z.reviews {
		want := authzv1.SubjectAccessReviewSpec{User: "bob", Groups: bob.Groups, UID: "u-1",
			Extra: map[string]authzv1.ExtraValue{"authentication.kubernetes.io/credential-id": {"JTI=1"}}, ResourceAttributes: r.ResourceAttributes}
		if diff := cmp.Diff(want, r); diff != "" {
			t.Errorf("review (-want +got):\n%s", diff)
		}
	}

	// Allowed everything: the change goes on; asked again, not remembered.
	s.Access = z.access(func(authzv1.SubjectAccessReviewSpec) bool { return true })
	z.reviews = nil
	for range 2 {
		if o := s.authorize(ctx, kueue.Applier{}, bob, ch); o.Kind != Saved {
			t.Errorf("allowed: %v %q", o.Kind, o.Message)
		}
	}
	if len(z.reviews) != 2*len(perms) {
		t.Errorf("%d reviews for two changes, want %d: a write's answer must not be remembered", len(z.reviews), 2*len(perms))
	}

	// The cluster cannot answer: nothing is changed.
	z.fail = true
	if o := s.authorize(ctx, kueue.Applier{}, bob, ch); o.Kind != Unavailable {
		t.Errorf("reviews failing: %v %q", o.Kind, o.Message)
	}
	// A change that does not say what it writes is never made for a user.
	z.fail = false
	if o := s.authorize(ctx, kueue.Applier{}, bob, plan{what: "team x"}); o.Kind != Unavailable {
		t.Errorf("a change without permissions: %v %q", o.Kind, o.Message)
	}
	// The console itself (auth mode none) asks nobody.
	z.reviews = nil
	if o := s.authorize(ctx, kueue.Applier{}, kueue.Identity{}, ch); o.Kind != Saved || len(z.reviews) != 0 || z.selfs != 0 {
		t.Errorf("the console's own change: %v, %d reviews", o.Kind, len(z.reviews)+z.selfs)
	}
}
