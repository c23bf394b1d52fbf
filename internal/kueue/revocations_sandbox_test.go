package kueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// A sign-out on one replica reaches every replica, one that starts later,
// and survives restarts; concurrent sign-outs keep each other's; expired
// entries go.
func TestSignOutReachesEveryReplica(t *testing.T) {
	c := clients(t)
	ns := isolated(t).State() + "-" + fmt.Sprint(time.Now().UnixNano()%100000)
	t.Cleanup(func() { _ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A replica's sign-outs as cmd/console wires them: the list, and this
	// process's own in front of it.
	replica := func() auth.SignOuts {
		r := kueue.NewSignOuts(c.Kube, ns, 4, auth.SignOutExpiry(time.Hour))
		r.Start(ctx)
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return r.Synced(), nil
		}); err != nil {
			t.Fatal("the sign-out list was never read")
		}
		return auth.Replicated(r, 4, time.Hour)
	}
	a, b := replica(), replica()
	now := time.Now().Truncate(time.Millisecond)

	// The namespace does not exist yet (a local run): the first sign-out makes it.
	if err := a.SignOut(ctx, "acct-1", now); err != nil {
		t.Fatal(err)
	}
	if got := a.SignedOutAt("acct-1"); !got.Equal(now) {
		t.Errorf("the replica that signed out reads %v, want %v", got, now)
	}
	seen := func(r auth.SignOuts, account string, at time.Time) bool {
		return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return r.SignedOutAt(account).Equal(at), nil
		}) == nil
	}
	if !seen(b, "acct-1", now) {
		t.Error("the other replica never read the sign-out")
	}
	if late := replica(); !late.SignedOutAt("acct-1").Equal(now) {
		t.Error("a replica started after the sign-out does not know it")
	}
	if at := b.SignedOutAt("acct-2"); !at.IsZero() {
		t.Errorf("an account that never signed out: %v", at)
	}

	// Both replicas sign out at once: neither loses the other's.
	errs := make(chan error, 2)
	go func() { errs <- a.SignOut(ctx, "acct-a", now) }()
	go func() { errs <- b.SignOut(ctx, "acct-b", now.Add(time.Second)) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// An entry older than the TTL goes with a later sign-out.
	if err := a.SignOut(ctx, "expired", now.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !seen(a, "expired", now.Add(-2*time.Hour)) {
		t.Fatal("the expired entry never showed")
	}
	if err := b.SignOut(ctx, "acct-c", now); err != nil {
		t.Fatal(err)
	}
	var data map[string]string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, kueue.SignOutsConfigMap, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		data = cm.Data
		_, kept := data["expired"]
		return !kept, nil
	}); err != nil {
		t.Errorf("the expired entry was never removed: %v", data)
	}
	want := []string{"acct-1", "acct-a", "acct-b", "acct-c"}
	if diff := cmp.Diff(want, slices.Sorted(maps.Keys(data))); diff != "" {
		t.Errorf("sign-out list (-want +got):\n%s", diff)
	}
	if !seen(b, "acct-c", now) || !b.Full() {
		t.Error("4 live entries of at most 4: the list is not full")
	}
}

// Attack: a stolen session cookie, signed out by its owner, worked again
// once another account had signed in and out enough times to push its
// revocation out of the full sign-out list. The real store (the ConfigMap
// every replica watches) with room for 5.
func TestSignOutCannotBeFlushedAgainstSandbox(t *testing.T) {
	c := clients(t)
	ns := isolated(t).State() + "-" + fmt.Sprint(time.Now().UnixNano()%100000)
	t.Cleanup(func() { _ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const max = 5
	keys := auth.RandomKeys()
	replica := func() *auth.Sessions {
		r := kueue.NewSignOuts(c.Kube, ns, max, auth.SignOutExpiry(auth.SessionTTL))
		r.Start(ctx)
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return r.Synced(), nil
		}); err != nil {
			t.Fatal("the sign-out list was never read")
		}
		return auth.NewSessions(keys, auth.SessionTTL, auth.Replicated(r, max, auth.SessionTTL))
	}
	here := replica()
	// The victim's token expires in an hour: their session ends before the flood's.
	stolen, victim, err := here.Create(auth.User{Name: "alice"}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := here.End(ctx, victim); err != nil {
		t.Fatal(err)
	}
	for range max + 1 {
		_, s, err := here.Create(auth.User{Name: "system:serviceaccount:apps:robot"}, time.Time{})
		if err != nil {
			t.Logf("the flood's sign-in was refused: %v", err)
			break
		}
		if err := here.End(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := here.Lookup(stolen); ok {
		t.Errorf("after %d sign-ins and sign-outs of another account the replica that signed out accepts the stolen cookie", max+1)
	}
	if _, ok := replica().Lookup(stolen); ok {
		t.Errorf("after %d sign-ins and sign-outs of another account a replica reading the sign-out list accepts the stolen cookie", max+1)
	}

	// Other accounts fill the list: a new account's sign-in is refused, and
	// every sign-out still holds.
	var ended []string
	for i := range max {
		value, s, err := here.Create(auth.User{Name: fmt.Sprintf("user-%d", i)}, time.Time{})
		if err != nil {
			break
		}
		ended = append(ended, value)
		if err := here.End(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := here.Create(auth.User{Name: "newcomer"}, time.Time{}); !errors.Is(err, auth.ErrSignOutsFull) {
		t.Errorf("a new account's sign-in with a full list: %v, want ErrSignOutsFull", err)
	}
	there := replica()
	for i, value := range append(ended, stolen) {
		if _, ok := there.Lookup(value); ok {
			t.Errorf("signed-out session %d opens on a replica reading the full list", i)
		}
	}
}

// A sign-out's time with the list holding n other accounts: one small
// patch, but the apiserver rewrites the whole list, so it grows with n.
//
//	go test -run '^$' -bench BenchmarkSignOut -benchtime 9x ./internal/kueue/
func BenchmarkSignOut(b *testing.B) {
	cfg, err := sandboxtest.Env(b).RESTConfig()
	if err != nil {
		b.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	for _, n := range []int{1, 1000, auth.DefaultMaxSignOuts} {
		b.Run(fmt.Sprintf("accounts=%d", n), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ns := "bench-signout-" + rand.String(5)
			defer func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) }()
			s := kueue.NewSignOuts(kube, ns, 2*n+1, auth.SignOutExpiry(auth.SessionTTL))
			at := time.Now()
			if err := s.SignOut(ctx, "other-0", at); err != nil { // makes the namespace and the list
				b.Fatal(err)
			}
			data := map[string]string{}
			for i := range n {
				data[fmt.Sprintf("other-%d", i)] = strconv.FormatInt(at.UnixMilli(), 10)
			}
			patch, _ := json.Marshal(map[string]any{"data": data})
			if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, kueue.SignOutsConfigMap, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				b.Fatal(err)
			}
			s.Start(ctx)
			for !s.Synced() {
				time.Sleep(20 * time.Millisecond)
			}
			b.ResetTimer()
			for range b.N {
				if err := s.SignOut(ctx, "measured", time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
