package kueue

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	visibilityv1beta2 "sigs.k8s.io/kueue/apis/visibility/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/memo"
)

// Positions reads where Kueue itself places waiting Workloads in their
// ClusterQueue: its visibility API (visibility.kueue.x-k8s.io/v1beta2,
// pendingworkloads), asked at most once per TTL per ClusterQueue however
// many pages want it, and less often while it fails (a cluster without the
// API, or a console not allowed to read it).
type Positions struct {
	kueue kueueclient.Interface
	memo  *memo.Memo[map[string]int]
	// asking bounds the queues asked at once: a CSV of every task must not
	// spend the console's request budget on 200 queues in one burst.
	asking chan struct{}
	// log hears of failures, at most once per warnEvery (lastWarned, unix
	// nanos): the pages then place tasks by the console's own order.
	log        *slog.Logger
	lastWarned atomic.Int64
}

// warnEvery spaces the warnings about the visibility API.
const warnEvery = 10 * time.Minute

// NewPositions asks kq, remembering answers for ttl and failures for 30 s;
// log (nil: none) hears of failures.
func NewPositions(kq kueueclient.Interface, ttl time.Duration, log *slog.Logger) *Positions {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Positions{kueue: kq, memo: &memo.Memo[map[string]int]{TTL: ttl, FailureTTL: 30 * time.Second},
		asking: make(chan struct{}, 4), log: log}
}

// Known gives at once the positions last read of the Workloads waiting in
// a ClusterQueue, by domain.LocalQueueKey(namespace, name), 0 next (Kueue
// lists the first 1000; the others are not in the map); ok is false when
// there are none yet. It reads them again in the background when they are
// older than the TTL: a page of 200 queues never waits for 200 answers.
func (p *Positions) Known(ctx context.Context, clusterQueue string) (map[string]int, bool) {
	return p.memo.Latest(ctx, clusterQueue, p.ask(clusterQueue))
}

func (p *Positions) ask(clusterQueue string) func(context.Context) (map[string]int, error) {
	return func(ctx context.Context) (map[string]int, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		select {
		case p.asking <- struct{}{}:
			defer func() { <-p.asking }()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		sum, err := p.kueue.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, clusterQueue, metav1.GetOptions{})
		if err != nil {
			if last, now := p.lastWarned.Load(), time.Now().UnixNano(); now-last > int64(warnEvery) && p.lastWarned.CompareAndSwap(last, now) {
				p.log.Warn("Kueue's visibility API did not answer: queue positions follow the console's own order (priority, then creation) until it does",
					"clusterQueue", clusterQueue, "err", err)
			}
			return nil, err
		}
		return positionsOf(sum.Items), nil
	}
}

// positionsOf are the tasks' places in Kueue's list of the Workloads
// waiting in a ClusterQueue, 0 next. Kueue's concurrent admission queues a
// Variant per flavor instead of the task (domain.VariantParent): the task
// is as far along as its first Variant, and counts once ahead of others.
func positionsOf(items []visibilityv1beta2.PendingWorkload) map[string]int {
	first := make(map[string]int32, len(items))
	for _, w := range items {
		name := w.Name
		if parent := domain.VariantParent(w.OwnerReferences); parent != nil {
			name = parent.Name
		}
		key := domain.LocalQueueKey(w.Namespace, name)
		if pos, ok := first[key]; !ok || w.PositionInClusterQueue < pos {
			first[key] = w.PositionInClusterQueue
		}
	}
	keys := slices.SortedFunc(maps.Keys(first), func(a, b string) int { return cmp.Compare(first[a], first[b]) })
	out := make(map[string]int, len(keys))
	for i, key := range keys {
		out[key] = i
	}
	return out
}
