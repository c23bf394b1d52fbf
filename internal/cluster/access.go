package cluster

import (
	"context"
	"strings"
	"sync"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Permission is one thing a page or form needs the user to be allowed.
type Permission struct {
	Verb, Group, Resource, Namespace string
	What                             string // "change ClusterQueues", for a note to the user
}

// Answers are remembered for AccessTTL; when the cluster could not answer,
// for AccessUnknownTTL.
const (
	AccessTTL        = 30 * time.Second
	AccessUnknownTTL = 5 * time.Second
	accessTimeout    = 3 * time.Second
)

type accessKey struct {
	user, groups string
	perm         Permission
}

type accessAnswer struct {
	allowed, known bool
	until          time.Time
}

// Access answers "may this user do that?" with SelfSubjectAccessReviews
// made as the user, and remembers the answers.
type Access struct {
	clientFor func(Identity) (kubernetes.Interface, error)
	now       func() time.Time

	mu      sync.Mutex
	answers map[accessKey]accessAnswer
}

// NewAccess asks as whom clientFor's clients act.
func NewAccess(clientFor func(Identity) (kubernetes.Interface, error)) *Access {
	return &Access{clientFor: clientFor, now: time.Now, answers: map[accessKey]accessAnswer{}}
}

// NewAccessFor asks with the clients' impersonation of each user.
func NewAccessFor(c Clients) *Access {
	return NewAccess(func(id Identity) (kubernetes.Interface, error) {
		kube, _, err := c.As(id)
		return kube, err
	})
}

// Allowed asks the cluster (or remembers). known is false when the cluster
// could not answer.
func (a *Access) Allowed(ctx context.Context, id Identity, p Permission) (allowed, known bool) {
	key := accessKey{user: id.Name, groups: strings.Join(id.Groups, "\x00"), perm: p}
	now := a.now()
	a.mu.Lock()
	if ans, ok := a.answers[key]; ok && now.Before(ans.until) {
		a.mu.Unlock()
		return ans.allowed, ans.known
	}
	a.mu.Unlock()

	ans := accessAnswer{until: now.Add(AccessUnknownTTL)}
	if client, err := a.clientFor(id); err == nil && client != nil {
		ctx, cancel := context.WithTimeout(ctx, accessTimeout)
		defer cancel()
		res, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
				Verb: p.Verb, Group: p.Group, Resource: p.Resource, Namespace: p.Namespace,
			}},
		}, metav1.CreateOptions{})
		if err == nil {
			ans = accessAnswer{allowed: res.Status.Allowed, known: true, until: now.Add(AccessTTL)}
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
