// Package leader runs the work that must happen once per installation (the
// task history recorder) on one replica only: the one holding a
// coordination.k8s.io Lease in the console's namespace. It is a thin layer
// over client-go's tools/leaderelection.
//
// The console's ServiceAccount needs, in that namespace: leases get, create
// and update (coordination.k8s.io).
//
// It imports nothing of the console.
package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// The timings bound how long work stops when its replica dies without
// releasing the Lease (a killed process, a lost node): another replica
// takes over once the Lease is LeaseDuration old in its own view. It sees
// the last renewal up to one retry late (a retry waits RetryPeriod plus up
// to 120 % jitter, 2.2 s) and acquires at its first retry after expiry
// (again up to 2.2 s): 8 to 12.4 s, within 15 s. RenewDeadline < LeaseDuration
// makes a holder that cannot renew (apiserver unreachable) stop its work
// before anyone else may start it. A replica that stops normally releases
// the Lease: the other takes over at its next retry, within 2.2 s.
const (
	LeaseDuration = 8 * time.Second
	RenewDeadline = 6 * time.Second
	RetryPeriod   = 1 * time.Second
)

// Config names the Lease and this replica.
type Config struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// Identity is this replica's name in the Lease (the pod name); by
	// default the host name and a random suffix.
	Identity string
	Log      *slog.Logger
}

// stopWait bounds how long a replica that stops (ctx ends) waits for its
// work to return before releasing the Lease.
const stopWait = 10 * time.Second

// Run campaigns for the Lease until ctx ends. Whenever this replica holds
// it, onStart runs with a context that ends when it loses the Lease (or ctx
// ends), then onStop (if not nil); after losing the Lease, Run campaigns
// again. When ctx ends, Run stops the
// work, waits for onStart to return (at most 10 s) and only then releases
// the Lease, so that two replicas never run the work at once on a normal
// stop.
func Run(ctx context.Context, cfg Config, onStart func(ctx context.Context), onStop func()) error {
	if cfg.Client == nil || cfg.Namespace == "" || cfg.Name == "" {
		return errors.New("leader election: a client, a namespace and a Lease name are needed")
	}
	if cfg.Identity == "" {
		cfg.Identity = DefaultIdentity()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.Name,
		cfg.Client.CoreV1(), cfg.Client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: cfg.Identity})
	if err != nil {
		return err
	}
	// The elector's context outlives ctx until the work has stopped.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	var mu sync.Mutex
	var stopWork context.CancelFunc
	var workDone chan struct{}
	go func() {
		<-ctx.Done()
		mu.Lock()
		stop, done := stopWork, workDone
		mu.Unlock()
		if stop != nil {
			stop()
			select {
			case <-done:
			case <-time.After(stopWait):
				cfg.Log.Warn("leader election: the work did not stop in time; releasing the lease anyway")
			}
		}
		stopElector()
	}()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   LeaseDuration,
		RenewDeadline:   RenewDeadline,
		RetryPeriod:     RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				workCtx, cancel := context.WithCancel(leading)
				done := make(chan struct{})
				mu.Lock()
				stopWork, workDone = cancel, done
				mu.Unlock()
				cfg.Log.Info("leader election: holding the lease; starting", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
				defer close(done)
				onStart(workCtx)
				if onStop != nil {
					onStop()
				}
			},
			OnStoppedLeading: func() {
				mu.Lock()
				stop := stopWork
				stopWork, workDone = nil, nil
				mu.Unlock()
				if stop != nil {
					stop()
					cfg.Log.Info("leader election: lease lost or released; stopping", "identity", cfg.Identity)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	for electorCtx.Err() == nil {
		le.Run(electorCtx)
	}
	releaseIfHeld(cfg)
	return nil
}

// releaseIfHeld clears the Lease when it still names this replica. The
// elector releases it on stop, but its release loses to a conflict when the
// stop comes right after it took the Lease, which would leave the other
// replicas waiting a whole LeaseDuration.
func releaseIfHeld(cfg Config) {
	ctx, cancel := context.WithTimeout(context.Background(), RenewDeadline)
	defer cancel()
	leases := cfg.Client.CoordinationV1().Leases(cfg.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, cfg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != cfg.Identity {
			return nil // released, or another replica holds it
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = nil, ptr.To[int32](1)
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		cfg.Log.Warn("leader election: releasing the lease", "lease", cfg.Namespace+"/"+cfg.Name, "err", err)
	}
}

// DefaultIdentity names a candidate outside a pod: the host name and a random
// suffix, so that two processes on one machine are two candidates.
func DefaultIdentity() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}
