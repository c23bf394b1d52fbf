package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openquota/console/internal/cluster"
)

// A sign-out on one replica ends the session on every replica, on one that
// starts later, and survives restarts; the list stays bounded.
func TestSignOutReachesEveryReplica(t *testing.T) {
	c := clients(t)
	ns := isolated(t).State() + "-" + fmt.Sprint(time.Now().UnixNano()%100000)
	t.Cleanup(func() { _ = c.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	replica := func() *cluster.Revocations {
		r := cluster.NewRevocations(c.kube, ns, 3)
		r.Start(ctx)
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return r.Synced(), nil
		}); err != nil {
			t.Fatal("the sign-out list was never read")
		}
		return r
	}
	a, b := replica(), replica()
	until := time.Now().Add(time.Hour)

	// The namespace does not exist yet (a local run): the first sign-out makes it.
	if err := a.Revoke(ctx, "session-1", until); err != nil {
		t.Fatal(err)
	}
	if !a.Revoked("session-1") {
		t.Error("the replica that signed out still accepts the session")
	}
	seen := func(r *cluster.Revocations, id string) bool {
		return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return r.Revoked(id), nil
		}) == nil
	}
	if !seen(b, "session-1") {
		t.Error("the other replica still accepts the signed-out session")
	}
	if late := replica(); !late.Revoked("session-1") {
		t.Error("a replica started after the sign-out accepts the session")
	}
	if b.Revoked("session-2") {
		t.Error("a session nobody signed out is revoked")
	}

	// Both replicas sign out at once: neither loses the other's.
	errs := make(chan error, 2)
	go func() { errs <- a.Revoke(ctx, "session-a", until) }()
	go func() { errs <- b.Revoke(ctx, "session-b", until.Add(time.Minute)) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Bounded at 3: the one expiring soonest went, expired ones go first.
	if err := a.Revoke(ctx, "expired", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	cm, err := c.kube.CoreV1().ConfigMaps(ns).Get(ctx, cluster.RevocationsConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Data["expired"]; ok || len(cm.Data) != 3 || cm.Data["session-a"] == "" || cm.Data["session-b"] == "" {
		t.Errorf("sign-out list %v: want the 3 unexpired ones, both concurrent ones kept", keysOf(cm))
	}
}

func keysOf(cm *corev1.ConfigMap) []string {
	var out []string
	for k := range cm.Data {
		out = append(out, k)
	}
	return out
}
