package kueue

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var (
	mayEditTeams  = Permission{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "clusterqueues"}
	mayEditPolicy = Permission{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "workloadpriorityclasses"}
)

// fakeSAR answers SubjectAccessReviews: only "admin" may do anything.
func fakeSAR(calls *atomic.Int32, fail *bool) kubernetes.Interface {
	client := k8sfake.NewClientset()
	client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		calls.Add(1)
		if *fail {
			return true, nil, errors.New("connection refused")
		}
		r := action.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		r.Status.Allowed = r.Spec.User == "admin"
		return true, r, nil
	})
	return client
}

func TestAccessAsksAboutTheUserAndRemembers(t *testing.T) {
	var calls atomic.Int32
	fail := false
	a := NewAccess(fakeSAR(&calls, &fail))
	now := time.Now()
	a.now = func() time.Time { return now }
	ctx := context.Background()
	admin, viewer := Identity{Name: "admin"}, Identity{Name: "viewer", Groups: []string{"ml"}}

	if ok, known := a.Allowed(ctx, admin, mayEditTeams); !ok || !known {
		t.Errorf("admin: %v %v", ok, known)
	}
	if ok, known := a.Allowed(ctx, viewer, mayEditTeams); ok || !known {
		t.Errorf("viewer: %v %v", ok, known)
	}
	for range 5 {
		a.Allowed(ctx, viewer, mayEditTeams)
	}
	if calls.Load() != 2 {
		t.Errorf("%d reviews, want 2 (answers cached per user)", calls.Load())
	}
	// Another permission, or the same name in other groups, with another UID
	// or other extras, is another question.
	a.Allowed(ctx, viewer, mayEditPolicy)
	a.Allowed(ctx, Identity{Name: "viewer", Groups: []string{"platform"}}, mayEditTeams)
	a.Allowed(ctx, Identity{Name: "viewer", Groups: []string{"ml"}, UID: "u-2"}, mayEditTeams)
	a.Allowed(ctx, Identity{Name: "viewer", Groups: []string{"ml"}, Extra: map[string][]string{"scopes": {"all"}}}, mayEditTeams)
	if calls.Load() != 6 {
		t.Errorf("%d reviews, want 6", calls.Load())
	}
	now = now.Add(AccessTTL)
	a.Allowed(ctx, viewer, mayEditTeams)
	if calls.Load() != 7 {
		t.Errorf("answer not refreshed after %v", AccessTTL)
	}
	// When the cluster cannot answer: unknown (the form stays enabled), asked again soon.
	fail = true
	now = now.Add(AccessTTL)
	if ok, known := a.Allowed(ctx, viewer, mayEditTeams); ok || known {
		t.Errorf("failing review: %v %v, want unknown", ok, known)
	}
	now = now.Add(AccessUnknownTTL)
	fail = false
	if ok, known := a.Allowed(ctx, viewer, mayEditTeams); ok || !known {
		t.Errorf("after recovery: %v %v", ok, known)
	}
}
