package kueue

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Permission is one thing a page, a form or a write needs the user to be
// allowed: a verb on a resource, in a namespace (cluster-wide when empty),
// on one object (any when Name is empty).
type Permission struct {
	Verb, Group, Resource, Namespace, Name string
	What                                   string // "change ClusterQueues", for a note to the user
}

// What a user must be allowed to use the console's forms at all: the
// forms are read-only without it, and the write path refuses a change
// before it looks at what the change names.
var (
	ChangeClusterQueues   = Permission{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "clusterqueues", What: "change ClusterQueues"}
	DeleteClusterQueues   = Permission{Verb: "delete", Group: "kueue.x-k8s.io", Resource: "clusterqueues", What: "delete ClusterQueues"}
	ChangePriorityClasses = Permission{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "workloadpriorityclasses", What: "change WorkloadPriorityClasses"}
	ChangeCohorts         = Permission{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "cohorts", What: "change Cohorts"}
	DeleteCohorts         = Permission{Verb: "delete", Group: "kueue.x-k8s.io", Resource: "cohorts", What: "delete Cohorts"}
)

// String names the permission for people: "patch clusterqueues.kueue.x-k8s.io
// hyperpod-ns-nlp-clusterqueue", "create rolebindings.rbac.authorization.k8s.io
// in namespace hyperpod-ns-nlp".
func (p Permission) String() string {
	s := p.Verb + " " + p.Resource
	if p.Group != "" {
		s += "." + p.Group
	}
	if p.Name != "" {
		s += " " + p.Name
	}
	if p.Namespace != "" {
		s += " in namespace " + p.Namespace
	}
	return s
}

// Answers are remembered for AccessTTL; when the cluster could not answer,
// for AccessUnknownTTL.
const (
	AccessTTL        = 30 * time.Second
	AccessUnknownTTL = 5 * time.Second
	accessTimeout    = 3 * time.Second
)

// authorizeConcurrency bounds the reviews of one write made at once.
const authorizeConcurrency = 8

type accessKey struct {
	who  string // the identity, every part of it
	perm Permission
}

type accessAnswer struct {
	allowed, known bool
	until          time.Time
}

// Access answers "may this user do that?" with SubjectAccessReviews that the
// console makes with its own identity about the user: name, groups, UID and
// extras, as the cluster's authenticator gave them, so the authorizer decides
// exactly as it would for the user's own request. For the console itself (an
// empty Identity) it asks with a SelfSubjectAccessReview.
type Access struct {
	kube kubernetes.Interface
	now  func() time.Time

	mu      sync.Mutex
	answers map[accessKey]accessAnswer
}

// NewAccess asks with the console's own client.
func NewAccess(kube kubernetes.Interface) *Access {
	return &Access{kube: kube, now: time.Now, answers: map[accessKey]accessAnswer{}}
}

// Allowed asks the cluster, or remembers an answer for AccessTTL: for pages
// and forms, which ask on every request. known is false when the cluster could
// not answer.
func (a *Access) Allowed(ctx context.Context, id Identity, p Permission) (allowed, known bool) {
	key := accessKey{who: identityKey(id), perm: p}
	key.perm.What = ""
	now := a.now()
	a.mu.Lock()
	if ans, ok := a.answers[key]; ok && now.Before(ans.until) {
		a.mu.Unlock()
		return ans.allowed, ans.known
	}
	a.mu.Unlock()

	ans := accessAnswer{until: now.Add(AccessUnknownTTL)}
	if allowed, err := a.review(ctx, id, p); err == nil {
		ans = accessAnswer{allowed: allowed, known: true, until: now.Add(AccessTTL)}
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

// Authorize asks, now and without remembering, whether the user may do every
// one of perms: the check before a write, so that a right taken away counts
// at once. It returns the permissions the cluster denies, in perms' order; an
// error when it could not tell.
func (a *Access) Authorize(ctx context.Context, id Identity, perms []Permission) ([]Permission, error) {
	allowed := make([]bool, len(perms))
	errs := make([]error, len(perms))
	var wg sync.WaitGroup
	sem := make(chan struct{}, authorizeConcurrency)
	for i, p := range perms {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			allowed[i], errs[i] = a.review(ctx, id, p)
		}()
	}
	wg.Wait()
	var denied []Permission
	for i, p := range perms {
		if errs[i] != nil {
			return nil, fmt.Errorf("asking whether %s may %s: %w", id.Name, p, errs[i])
		}
		if !allowed[i] {
			denied = append(denied, p)
		}
	}
	return denied, nil
}

// review asks the cluster once.
func (a *Access) review(ctx context.Context, id Identity, p Permission) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, accessTimeout)
	defer cancel()
	attrs := &authzv1.ResourceAttributes{Verb: p.Verb, Group: p.Group, Resource: p.Resource, Namespace: p.Namespace, Name: p.Name}
	if id.Name == "" {
		res, err := a.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return res.Status.Allowed, nil
	}
	spec := authzv1.SubjectAccessReviewSpec{User: id.Name, Groups: id.Groups, UID: id.UID, ResourceAttributes: attrs}
	if len(id.Extra) > 0 {
		spec.Extra = make(map[string]authzv1.ExtraValue, len(id.Extra))
		for k, v := range id.Extra {
			spec.Extra[k] = authzv1.ExtraValue(v)
		}
	}
	res, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return res.Status.Allowed, nil
}

// identityKey is every part of an identity the authorizer may decide on, in
// one string: two identities that differ in any part get their own answers.
func identityKey(id Identity) string {
	var b strings.Builder
	b.WriteString(id.Name + "\x00" + id.UID + "\x00" + strings.Join(id.Groups, "\x01"))
	keys := make([]string, 0, len(id.Extra))
	for k := range id.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString("\x00" + k + "=" + strings.Join(id.Extra[k], "\x01"))
	}
	return b.String()
}
