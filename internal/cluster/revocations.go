package cluster

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/openquota/console/internal/auth"
)

// RevocationsConfigMap is the ConfigMap, in the console's state namespace,
// that lists signed-out sessions: session id → when it would have expired
// (unix seconds).
const RevocationsConfigMap = "quota-console-signed-out"

// Revocations are the signed-out sessions, kept in a ConfigMap that every
// replica watches: signing out on one replica ends the session on all of
// them (auth.Revocations). Sessions themselves are sealed in their cookies;
// only sign-outs are stored, each until its session would have expired.
type Revocations struct {
	kube      kubernetes.Interface
	namespace string
	max       int
	now       func() time.Time

	own    *auth.MemoryRevocations // this replica's, effective at once
	mu     sync.RWMutex
	listed map[string]time.Time // as the ConfigMap says
	synced atomic.Bool
}

// NewRevocations keeps at most max signed-out sessions (those expiring
// soonest go first) in namespace.
func NewRevocations(kube kubernetes.Interface, namespace string, max int) *Revocations {
	return &Revocations{kube: kube, namespace: namespace, max: max, now: time.Now,
		own: auth.NewMemoryRevocations(max), listed: map[string]time.Time{}}
}

// Start watches the ConfigMap until ctx ends.
func (r *Revocations) Start(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(r.kube, 0, informers.WithNamespace(r.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", RevocationsConfigMap).String()
		}))
	inf := factory.Core().V1().ConfigMaps().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.take(obj) },
		UpdateFunc: func(_, obj any) { r.take(obj) },
		DeleteFunc: func(any) { r.take(nil) },
	})
	factory.Start(ctx.Done())
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			r.synced.Store(true)
		}
	}()
}

// Synced reports whether the list was read once.
func (r *Revocations) Synced() bool { return r.synced.Load() }

func (r *Revocations) take(obj any) {
	cm, _ := obj.(*corev1.ConfigMap)
	listed := parseRevocations(cm)
	r.mu.Lock()
	r.listed = listed
	r.mu.Unlock()
}

func parseRevocations(cm *corev1.ConfigMap) map[string]time.Time {
	out := map[string]time.Time{}
	if cm == nil {
		return out
	}
	for id, v := range cm.Data {
		if sec, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[id] = time.Unix(sec, 0)
		}
	}
	return out
}

// Revoked implements auth.Revocations.
func (r *Revocations) Revoked(id string) bool {
	if r.own.Revoked(id) {
		return true
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	until, ok := r.listed[id]
	return ok && r.now().Before(until)
}

// Revoke implements auth.Revocations: at once on this replica, and through
// the ConfigMap on the others.
func (r *Revocations) Revoke(ctx context.Context, id string, until time.Time) error {
	_ = r.own.Revoke(ctx, id, until)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cms := r.kube.CoreV1().ConfigMaps(r.namespace)
		cm, err := cms.Get(ctx, RevocationsConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RevocationsConfigMap, Namespace: r.namespace,
				Labels: map[string]string{"app.kubernetes.io/part-of": "quota-console"}}}
			cm.Data = r.withRevocation(nil, id, until)
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsNotFound(err) { // a local run against a fresh cluster; installs create it
				if err := createStateNamespace(ctx, r.kube, r.namespace); err != nil {
					return err
				}
				_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			}
			if apierrors.IsAlreadyExists(err) { // another replica made it first: add to theirs
				return apierrors.NewConflict(corev1.Resource("configmaps"), RevocationsConfigMap, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		cm.Data = r.withRevocation(cm.Data, id, until)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the sign-out for the other replicas: %w", err)
	}
	return nil
}

// withRevocation is data with id added, expired entries dropped, and at
// most max entries.
func (r *Revocations) withRevocation(data map[string]string, id string, until time.Time) map[string]string {
	all := parseRevocations(&corev1.ConfigMap{Data: data})
	all[id] = until
	kept := auth.PruneRevocations(all, r.now(), r.max)
	out := make(map[string]string, len(kept))
	for k, t := range kept {
		out[k] = strconv.FormatInt(t.Unix(), 10)
	}
	return out
}
