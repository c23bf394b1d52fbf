package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/sandbox"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// The whole watcher path against the real thing: probes created in the
// test sandbox stay pending in Kueue, the console built from this checkout
// shows each one on every page that must show it, and the watchers (today's
// refetch protocol) see every one; the kubectl way counts them too.
func TestWatchersFollowTheConsole(t *testing.T) {
	env := sandboxtest.Env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	cl, err := newCluster(env.Kubeconfig, "hyperpod-ns-")
	if err != nil {
		t.Fatal(err)
	}
	id := rand.String(5)
	cl.probeClass = "loadtest-probe-" + id // other tests share the sandbox: a class of our own
	tm := createTeam(t, env, "lt-"+id)
	if err := cl.ensureProbeClass(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.deleteProbeClass(context.Background()) })

	teams, err := cl.teams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range teams {
		found = found || x == tm
	}
	if !found {
		t.Fatalf("teams() = %v; want it to find %+v", teams, tm)
	}

	con, err := startConsole(ctx, buildConsole(t), env.Kubeconfig, env.PrometheusURL, "127.0.0.1:0", "",
		filepath.Join(t.TempDir(), "console.log"), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Stop)

	o := options{watchers: 5, tasksWatchers: 1, rate: 5, createFor: 1500 * time.Millisecond, seeTimeout: 30 * time.Second}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	pr := &prober{c: cl, runID: id}
	wr, err := runWatchers(ctx, o, client, con, pr, []teamQueue{tm})
	if err != nil {
		t.Fatal(err)
	}
	if wr.Probes < 5 || wr.ProbeCreateFailures != 0 {
		t.Fatalf("%d probes created, %d failed (%s); want about 8 and none failed", wr.Probes, wr.ProbeCreateFailures, wr.ProbeCreateError)
	}
	// /tasks, /tasks?team=, /usage and /usage/<team> must each show every probe; / shows none.
	if wr.All.Pairs != 4*wr.Probes || wr.All.Missed != 0 || wr.All.Early != 0 {
		t.Errorf("pairs %d (want %d), missed %d, early %d; want every page to show every probe once",
			wr.All.Pairs, 4*wr.Probes, wr.All.Missed, wr.All.Early)
	}
	if wr.Modes[modePush] != 4 || wr.NoLiveParts != 1 || wr.Refused != 0 || wr.Failed != 0 {
		t.Errorf("modes %v, %d without live parts, %d refused, %d failed %v; want 4 watchers of pushed parts and the Cluster page without a stream",
			wr.Modes, wr.NoLiveParts, wr.Refused, wr.Failed, wr.FailedReasons)
	}
	if wr.All.P50Seconds <= 0 || wr.All.P95Seconds < wr.All.P50Seconds || wr.All.Refetches != 0 {
		t.Errorf("p50 %v, p95 %v, %d refetches; want measured latencies and no page fetched again", wr.All.P50Seconds, wr.All.P95Seconds, wr.All.Refetches)
	}
	if wr.ServerPages.Count == 0 || wr.RSSWithWatchersMiB <= 0 {
		t.Errorf("server requests %v, RSS %v MiB; want the console's histogram and memory read", wr.ServerPages.Count, wr.RSSWithWatchersMiB)
	}

	wls, err := cl.kq.KueueV1beta2().Workloads(tm.Namespace).List(ctx, metav1.ListOptions{LabelSelector: probeLabel})
	if err != nil {
		t.Fatal(err)
	}
	for _, wl := range wls.Items {
		if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved) {
			t.Errorf("probe %s got quota; probes must stay pending", wl.Name)
		}
	}

	t.Run("kubectl way", func(t *testing.T) {
		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			t.Skip("no kubectl on this machine")
		}
		k, err := runKubectlWay(ctx, kubectl, env.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		var got *classTotal
		for i := range k.Classes {
			if k.Classes[i].Class == cl.probeClass {
				got = &k.Classes[i]
			}
		}
		if got == nil || got.Pending != len(wls.Items) || got.Running != 0 || k.Seconds <= 0 || k.Bytes == 0 {
			t.Errorf("kubectl way: class row %+v in %+v; want %d pending probes", got, k, len(wls.Items))
		}
	})

	n, err := cl.deleteProbes(ctx)
	if err != nil || n < wr.Probes {
		t.Errorf("deleteProbes = %d, %v; want at least the %d probes", n, err, wr.Probes)
	}
	left, err := cl.kq.KueueV1beta2().Workloads(tm.Namespace).List(ctx, metav1.ListOptions{LabelSelector: probeLabel})
	if err != nil || len(left.Items) != 0 {
		t.Errorf("after deleteProbes: %d probes left (%v)", len(left.Items), err)
	}
}

// createTeam makes a team the way the load data lays one out: a namespace
// with a LocalQueue feeding its own ClusterQueue (with no quota: nothing in
// it is ever admitted).
func createTeam(t *testing.T, env *sandbox.Env, name string) teamQueue {
	t.Helper()
	cfg, err := env.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	cl, err := newCluster(env.Kubeconfig, "hyperpod-ns-")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tm := teamQueue{Name: name, Namespace: "hyperpod-ns-" + name, LocalQueue: "hyperpod-ns-" + name + "-localqueue"}
	cqName := tm.Namespace + "-clusterqueue"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tm.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), tm.Namespace, metav1.DeleteOptions{})
	})
	cq := &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: cqName},
		Spec: kueuev1beta2.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{corev1.LabelMetadataName: tm.Namespace}}},
	}
	if _, err := cl.kq.KueueV1beta2().ClusterQueues().Create(ctx, cq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.kq.KueueV1beta2().ClusterQueues().Delete(context.Background(), cqName, metav1.DeleteOptions{})
	})
	lq := &kueuev1beta2.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: tm.LocalQueue, Namespace: tm.Namespace},
		Spec:       kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(cqName)},
	}
	if _, err := cl.kq.KueueV1beta2().LocalQueues(tm.Namespace).Create(ctx, lq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return tm
}

// buildConsole builds the console of this checkout.
func buildConsole(t *testing.T) string {
	t.Helper()
	root, err := sandbox.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "console")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/console")
	cmd.Dir = root
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the console: %v\n%s", err, out)
	}
	return bin
}
