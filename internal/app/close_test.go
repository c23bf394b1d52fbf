package app_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/openquota/console/internal/app"
	"github.com/openquota/console/internal/taskhistory"
)

// A console that stops closes the store it opened (cmd/console calls Close
// after its server has stopped): SQLite's file is left consistent and
// PostgreSQL's connections are given back.
func TestStoppedAppClosesItsTaskHistoryStore(t *testing.T) {
	s := ownSettings()
	lease := "test-close-" + rand.String(8)
	c := startConsole(t, setup{settings: s, taskHistory: app.TaskHistoryConfig{Driver: taskhistory.DriverSQLite,
		Path: filepath.Join(t.TempDir(), "history.db"), Lease: lease, Identity: "app-test-" + rand.String(5)}})
	t.Cleanup(func() {
		_ = c.kube.CoordinationV1().Leases(s.State()).Delete(context.Background(), lease, metav1.DeleteOptions{})
	})
	st, err := c.app.TaskHistory.Store()
	if err != nil {
		t.Fatalf("the task history store did not open: %v", err)
	}
	now := time.Now()
	window := taskhistory.Window{From: now.Add(-time.Hour), To: now}
	if _, err := st.TaskStats(context.Background(), window); err != nil {
		t.Fatalf("the open store does not answer: %v", err)
	}

	c.stop()
	if err := c.app.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := st.TaskStats(context.Background(), window); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("the store still answers after the app stopped (err %v): it was not closed", err)
	}
	if err := c.app.TaskHistory.Available(); err == nil {
		t.Error("the pages still see a task history after the app stopped")
	}
}

// A console with a SQLite file of its own (a developer's, next to the
// cluster's console on PostgreSQL) records though another console holds
// the Lease: the Lease elects one recorder among the replicas of a shared
// store, and a file is one console's.
func TestASQLiteConsoleRecordsWhileAnotherHoldsTheLease(t *testing.T) {
	s := ownSettings()
	lease := "test-held-" + rand.String(8)
	ctx := context.Background()
	kube := newConsole(t).kube
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.State()}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	held := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease, Namespace: s.State()},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-cluster-console"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	if _, err := kube.CoordinationV1().Leases(s.State()).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoordinationV1().Leases(s.State()).Delete(context.Background(), lease, metav1.DeleteOptions{})
	})

	c := startConsole(t, setup{settings: s, taskHistory: app.TaskHistoryConfig{Driver: taskhistory.DriverSQLite,
		Path: filepath.Join(t.TempDir(), "history.db"), Lease: lease, Identity: "app-test-" + rand.String(5)}})
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		rec := c.app.TaskHistory.Recorder()
		return rec != nil && rec.Stats().Backfills >= 1, nil
	}); err != nil {
		t.Fatal("the SQLite console never recorded while another console held the Lease")
	}
	if got, _ := kube.CoordinationV1().Leases(s.State()).Get(ctx, lease, metav1.GetOptions{}); got == nil || ptr.Deref(got.Spec.HolderIdentity, "") != "the-cluster-console" {
		t.Errorf("the SQLite console took the Lease of the shared store's recorder: %+v", got)
	}
}
