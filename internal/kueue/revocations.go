package kueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/openquota/console/internal/domain"
)

// SignOutsConfigMap is the ConfigMap, in the console's state namespace, that
// lists when accounts signed out: one key per account (a keyed hash of the
// user name, made by the sessions' owner) → unix milliseconds.
const SignOutsConfigMap = "quota-console-signed-out"

// maxPrunedAtOnce bounds the expired entries one prune removes.
const maxPrunedAtOnce = 500

// jsonPointerEscaper escapes a key for a JSON patch path (RFC 6901).
var jsonPointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// SignOuts are the accounts' sign-outs, kept in a ConfigMap that every
// replica watches: signing out on one replica ends the account's sessions
// on all of them, once they read it. A sign-out writes its own key with a
// merge patch, never the whole list, and expired entries are removed, each
// only if it is still the one read. Which entries expire is the sessions'
// rule, given as expired.
type SignOuts struct {
	kube      kubernetes.Interface
	namespace string
	max       int
	expired   func(at, now time.Time) bool
	now       func() time.Time

	mu     sync.RWMutex
	listed map[string]listedSignOut // as the ConfigMap says
	synced atomic.Bool
}

// listedSignOut is an entry of the ConfigMap: the time, and the value it
// was read from.
type listedSignOut struct {
	at    time.Time
	value string
}

// NewSignOuts keeps the sign-outs of at most max accounts in namespace,
// each until expired says so.
func NewSignOuts(kube kubernetes.Interface, namespace string, max int, expired func(at, now time.Time) bool) *SignOuts {
	return &SignOuts{kube: kube, namespace: namespace, max: max, expired: expired, now: time.Now,
		listed: map[string]listedSignOut{}}
}

// Start watches the ConfigMap until ctx ends.
func (s *SignOuts) Start(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(s.kube, 0, informers.WithNamespace(s.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", SignOutsConfigMap).String()
		}))
	inf := factory.Core().V1().ConfigMaps().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.take(obj) },
		UpdateFunc: func(_, obj any) { s.take(obj) },
		DeleteFunc: func(any) { s.take(nil) },
	})
	factory.Start(ctx.Done())
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			s.synced.Store(true)
		}
	}()
}

// Synced reports whether the list was read once.
func (s *SignOuts) Synced() bool { return s.synced.Load() }

func (s *SignOuts) take(obj any) {
	cm, _ := obj.(*corev1.ConfigMap)
	listed := parseSignOuts(cm)
	s.mu.Lock()
	s.listed = listed
	s.mu.Unlock()
}

// parseSignOuts reads the ConfigMap; a value it cannot read (an older
// format) reads as long expired.
func parseSignOuts(cm *corev1.ConfigMap) map[string]listedSignOut {
	out := map[string]listedSignOut{}
	if cm == nil {
		return out
	}
	for account, v := range cm.Data {
		ms, _ := strconv.ParseInt(v, 10, 64)
		out[account] = listedSignOut{at: time.UnixMilli(ms), value: v}
	}
	return out
}

// SignedOutAt is when account last signed out, as the list says (zero if
// it did not).
func (s *SignOuts) SignedOutAt(account string) time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.listed[account].at
}

// Full reports whether the list holds max accounts whose entries have not
// expired.
func (s *SignOuts) Full() bool {
	now := s.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.listed) < s.max {
		return false
	}
	live := 0
	for _, e := range s.listed {
		if !s.expired(e.at, now) {
			live++
		}
	}
	return live >= s.max
}

// SignOut records that account signed out at at, for every replica.
func (s *SignOuts) SignOut(ctx context.Context, account string, at time.Time) error {
	value := strconv.FormatInt(at.UnixMilli(), 10)
	patch, err := json.Marshal(map[string]any{"data": map[string]string{account: value}})
	if err != nil {
		return err
	}
	cms := s.kube.CoreV1().ConfigMaps(s.namespace)
	for attempt := 0; ; attempt++ {
		_, err = cms.Patch(ctx, SignOutsConfigMap, types.MergePatchType, patch, metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) || attempt > 0 {
			break
		}
		// The first sign-out: make the list (installs make the namespace;
		// a local run against a fresh cluster makes it here).
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: SignOutsConfigMap, Namespace: s.namespace,
			Labels: map[string]string{domain.PartOfLabel: domain.ManagedByValue}}, Data: map[string]string{account: value}}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			if err = createStateNamespace(ctx, s.kube, s.namespace); err == nil {
				_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			}
		}
		if !apierrors.IsAlreadyExists(err) { // else another replica made it first: patch theirs
			break
		}
	}
	if err != nil {
		return fmt.Errorf("recording the sign-out for the other replicas: %w", err)
	}
	s.prune(ctx)
	return nil
}

// prune removes entries that expired, as read; an entry that changed in
// between (the account signed out again) makes the patch fail as a whole,
// and a later sign-out tries again with what it reads then.
func (s *SignOuts) prune(ctx context.Context) {
	now := s.now()
	var ops []map[string]string
	s.mu.RLock()
	for account, e := range s.listed {
		if len(ops) >= 2*maxPrunedAtOnce {
			break
		}
		if s.expired(e.at, now) {
			path := "/data/" + jsonPointerEscaper.Replace(account)
			ops = append(ops,
				map[string]string{"op": "test", "path": path, "value": e.value},
				map[string]string{"op": "remove", "path": path})
		}
	}
	s.mu.RUnlock()
	if len(ops) == 0 {
		return
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return
	}
	_, _ = s.kube.CoreV1().ConfigMaps(s.namespace).Patch(ctx, SignOutsConfigMap, types.JSONPatchType, patch, metav1.PatchOptions{})
}
