package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/sandbox"
	"github.com/openquota/console/sandbox/sandboxtest"
)

func TestRangeFor(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 34, 56, 789, time.UTC)
	for _, name := range RangeNames() {
		r, ok := RangeFor(name, now)
		if !ok {
			t.Fatalf("RangeFor(%q) unknown", name)
		}
		points := int(r.End.Sub(r.Start)/r.Step) + 1
		if points < 100 || points > 300 {
			t.Errorf("%s: %d points, want 100-300", name, points)
		}
		if r.End.After(now) || now.Sub(r.End) >= r.Step || r.End.Truncate(r.Step) != r.End {
			t.Errorf("%s: end %s is not now rounded down to the step %s", name, r.End, r.Step)
		}
	}
	want := map[string]time.Duration{"1h": time.Hour, "6h": 6 * time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}
	if got := RangeNames(); len(got) != len(want) {
		t.Errorf("RangeNames() = %v", got)
	}
	for name, d := range want {
		if r, _ := RangeFor(name, now); r.End.Sub(r.Start) != d {
			t.Errorf("%s spans %s", name, r.End.Sub(r.Start))
		}
	}
	for _, bad := range []string{"", "1d", "30m", "7D"} {
		if _, ok := RangeFor(bad, now); ok {
			t.Errorf("RangeFor(%q) accepted", bad)
		}
	}
}

func TestQueries(t *testing.T) {
	for got, want := range map[string]string{
		namespacesGPUUtilQuery([]string{"hyperpod-ns-nlp"}):  `avg(DCGM_FI_DEV_GPU_UTIL{namespace=~"hyperpod-ns-nlp",GPU_I_PROFILE=""})`,
		namespacesGPUUtilQuery([]string{"default", `a.b"c`}): `avg(DCGM_FI_DEV_GPU_UTIL{namespace=~"default|a\\.b\"c",GPU_I_PROFILE=""})`,
		utilSumQuery:               `sum by (namespace) (DCGM_FI_DEV_GPU_UTIL{namespace!="",GPU_I_PROFILE=""})`,
		utilCountQuery:             `count by (namespace) (DCGM_FI_DEV_GPU_UTIL{namespace!="",GPU_I_PROFILE=""})`,
		heldGPUUtilOver(time.Hour): `avg_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",GPU_I_PROFILE=""}[1h]) and DCGM_FI_DEV_GPU_UTIL{namespace!="",GPU_I_PROFILE=""}`,
		queryClusterGPUUtil:        `avg(DCGM_FI_DEV_GPU_UTIL{GPU_I_PROFILE=""})`,
		vcpuAllocationQuery(1536):  `100 * sum(kueue_cluster_queue_resource_usage{resource="cpu",replica_role!="follower"}) / 1536`,
		queueQuotaQuery("nvidia.com/gpu", "hyperpod-ns-nlp-clusterqueue"): `sum(kueue_cluster_queue_nominal_quota{resource="nvidia.com/gpu",replica_role!="follower",cluster_queue="hyperpod-ns-nlp-clusterqueue"})`,
		queueUsageQuery("nvidia.com/gpu", "q"):                            `sum(kueue_cluster_queue_resource_usage{resource="nvidia.com/gpu",replica_role!="follower",cluster_queue="q"})`,
		queueBorrowedQuery("nvidia.com/gpu", "q"):                         `sum(clamp_min(sum by (flavor) (kueue_cluster_queue_resource_usage{resource="nvidia.com/gpu",replica_role!="follower",cluster_queue="q"}) - sum by (flavor) (kueue_cluster_queue_nominal_quota{resource="nvidia.com/gpu",replica_role!="follower",cluster_queue="q"}), 0))`,
		queueUsageQuery("memory", "q"):                                    `sum(kueue_cluster_queue_resource_usage{resource="memory",replica_role!="follower",cluster_queue="q"}) / 1073741824`,
		queueQuotaQuery("cpu", "q"):                                       `sum(kueue_cluster_queue_nominal_quota{resource="cpu",replica_role!="follower",cluster_queue="q"})`,
		queueGPUByFlavorQuery(metricLendingLimit):                         `sum by (cluster_queue, cohort, flavor) (kueue_cluster_queue_lending_limit{resource="nvidia.com/gpu",replica_role!="follower"})`,
	} {
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

// every method of p fails with ErrUnavailable.
func allUnavailable(t *testing.T, p *Prom) {
	t.Helper()
	ctx := context.Background()
	r, _ := RangeFor("1h", time.Now())
	_, err1 := p.ClusterUtilization(ctx, r, 100)
	_, err2 := p.NamespaceGPUUtilization(ctx)
	_, err3 := p.TeamSeries(ctx, TeamQueue{ClusterQueue: "q", Namespaces: []string{"ns"}}, r)
	_, err4 := p.UsageReport(ctx, domain.DefaultSettings, nil, time.Now(), time.Now())
	for i, err := range []error{err1, err2, err3, err4} {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("method %d: err = %v, want ErrUnavailable", i+1, err)
		}
	}
}

func TestNoURLIsUnavailable(t *testing.T) {
	p, err := NewProm("")
	if err != nil {
		t.Fatal(err)
	}
	allUnavailable(t, p)
	allUnavailable(t, nil)
}

func TestNewPromRejectsMalformedURL(t *testing.T) {
	for _, u := range []string{"prometheus:9090", "http://", "://prometheus", "ftp://prometheus:9090"} {
		if _, err := NewProm(u); err == nil {
			t.Errorf("NewProm(%q) accepted", u)
		}
	}
	if _, err := NewProm("http://prometheus.monitoring:9090/prom/"); err != nil {
		t.Errorf("a URL with a path prefix: %v", err)
	}
}

func TestUnreachablePrometheusIsUnavailable(t *testing.T) {
	p, err := NewProm("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	allUnavailable(t, p)
}

func TestHangingPrometheusTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm() // with the body read, the server notices the client hanging up
		select {
		case <-r.Context().Done():
		case <-release:
		case <-time.After(30 * time.Second): // never hold the test's server open for long
		}
	}))
	defer srv.Close()
	defer close(release)
	p, err := NewProm(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	p.Timeout = 200 * time.Millisecond
	_, err = p.NamespaceGPUUtilization(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("err = %v, want ErrUnavailable", err)
	}
	r, _ := RangeFor("1h", time.Now())
	if _, err := p.ClusterUtilization(context.Background(), r, 10); !errors.Is(err, ErrUnavailable) {
		t.Errorf("err = %v, want ErrUnavailable", err)
	}
}

// fakeProm answers the query API with body for every query and records the queries.
func fakeProm(t *testing.T, status int, body func(query string) string) (*Prom, *[]string) {
	t.Helper()
	var (
		mu      sync.Mutex
		queries []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.FormValue("query")
		mu.Lock()
		queries = append(queries, q)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body(q))
	}))
	t.Cleanup(srv.Close)
	p, err := NewProm(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return p, &queries
}

func TestServerErrorsAreUnavailableButBadQueriesAreNot(t *testing.T) {
	down, _ := fakeProm(t, http.StatusServiceUnavailable, func(string) string { return "overloaded" })
	if _, err := down.NamespaceGPUUtilization(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("503: err = %v, want ErrUnavailable", err)
	}
	bad, _ := fakeProm(t, http.StatusBadRequest, func(string) string {
		return `{"status":"error","errorType":"bad_data","error":"1:5: parse error"}`
	})
	_, err := bad.NamespaceGPUUtilization(context.Background())
	if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "parse error") {
		t.Errorf("bad_data: err = %v, want a non-ErrUnavailable error naming the parse error", err)
	}
}

func TestResultsAreTyped(t *testing.T) {
	p, queries := fakeProm(t, http.StatusOK, func(q string) string {
		switch {
		case strings.HasPrefix(q, "sum by (namespace)"):
			return `{"status":"success","data":{"resultType":"vector","result":[
				{"metric":{"namespace":"hyperpod-ns-nlp"},"value":[1782864000,"170"]},
				{"metric":{"namespace":"hyperpod-ns-vision"},"value":[1782864000,"12.5"]},
				{"metric":{"namespace":"idle"},"value":[1782864000,"NaN"]}]}}`
		case strings.HasPrefix(q, "count by (namespace)"):
			return `{"status":"success","data":{"resultType":"vector","result":[
				{"metric":{"namespace":"hyperpod-ns-nlp"},"value":[1782864000,"2"]},
				{"metric":{"namespace":"hyperpod-ns-vision"},"value":[1782864000,"1"]},
				{"metric":{"namespace":"idle"},"value":[1782864000,"1"]}]}}`
		}
		// Range queries: one series with a NaN sample (0/0), which is dropped.
		return `{"status":"success","data":{"resultType":"matrix","result":[
			{"metric":{},"values":[[1782864000,"1"],[1782864015,"NaN"],[1782864030,"3"]]}]}}`
	})
	ctx := context.Background()
	util, err := p.NamespaceGPUUtilization(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]domain.Readings{"hyperpod-ns-nlp": {Sum: 170, Count: 2}, "hyperpod-ns-vision": {Sum: 12.5, Count: 1}}, util); diff != "" {
		t.Errorf("NamespaceGPUUtilization (-want +got):\n%s", diff)
	}
	r, _ := RangeFor("1h", time.Unix(1782864100, 0))
	c, err := p.TeamSeries(ctx, TeamQueue{ClusterQueue: "hyperpod-ns-nlp-clusterqueue", Namespaces: []string{"hyperpod-ns-nlp"}}, r)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1782864000, 0)
	wantPoints := []Point{{T: t0, V: 1}, {T: t0.Add(30 * time.Second), V: 3}}
	want := TeamCharts{
		Quota:       Series{Name: "Quota", Points: wantPoints},
		InUse:       Series{Name: "In use", Points: wantPoints},
		Borrowed:    Series{Name: "Borrowed", Points: wantPoints},
		Utilization: Series{Name: "GPU utilization", Points: wantPoints},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("TeamSeries (-want +got):\n%s", diff)
	}
	for _, q := range *queries {
		if strings.Contains(q, "kueue_") && !strings.Contains(q, `cluster_queue="hyperpod-ns-nlp-clusterqueue"`) {
			t.Errorf("query not scoped to the team's ClusterQueue: %s", q)
		}
	}
}

// --- Against the sandbox's Prometheus ---

func sandboxClients(t *testing.T) (*Prom, kubernetes.Interface, kueueclient.Interface) {
	t.Helper()
	env := sandboxtest.Env(t)
	cfg, err := env.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProm(env.PrometheusURL)
	if err != nil {
		t.Fatal(err)
	}
	return p, kubernetes.NewForConfigOrDie(cfg), kueueclient.NewForConfigOrDie(cfg)
}

// isolated gives a test its own namespace prefix and cohort.
func isolated() domain.Settings {
	id := rand.String(5)
	return domain.Settings{NamespacePrefix: "t" + id + "-", Cohort: "cohort-" + id}
}

// poll retries cond until it holds; an error is retried too (a query that
// timed out while the machine is busy is not a wrong answer) and reported
// when time runs out.
func poll(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last error: %v)", what, err, last)
	}
}

func TestSandboxTeamGPUUtilizationSeesPinnedPods(t *testing.T) {
	p, kube, _ := sandboxClients(t)
	ctx := context.Background()
	s := isolated()
	// Three teams: one GPU busy at 85 %, two GPUs at 30 %, two MIG
	// partitions at 40 %; the scheduler places the pods on fake GPU nodes
	// and the exporter stand-in reports them.
	for team, pod := range map[string]struct {
		resource corev1.ResourceName
		gpus     int64
		util     string
	}{"vision": {sandbox.ResourceGPU, 1, "85"}, "nlp": {sandbox.ResourceGPU, 2, "30"}, "notebooks": {domain.PartitionResource("mig-1g.10gb"), 2, "40"}} {
		ns := s.Namespace(team)
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
		gpus := *resource.NewQuantity(pod.gpus, resource.DecimalSI)
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "trainer", Annotations: map[string]string{sandbox.GPUUtilAnnotation: pod.util}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "trainer",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{pod.resource: gpus}}}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The figures come by namespace; the three teams' namespaces name them.
	teams := map[string]string{}
	for _, team := range []string{"vision", "nlp", "notebooks"} {
		teams[s.Namespace(team)] = team
	}
	// Whole GPUs only: the partitions' utilization is their engine activity,
	// below (dcgm-exporter has no DCGM_FI_DEV_GPU_UTIL for a partition, and
	// the stand-in's would weigh a seventh of a GPU as much as a GPU).
	want := map[string]float64{"vision": 85, "nlp": 30}
	var got map[string]float64
	poll(t, 90*time.Second, "pinned utilization never reached NamespaceGPUUtilization", func(ctx context.Context) (bool, error) {
		byNamespace, err := p.NamespaceGPUUtilization(ctx)
		got = domain.UtilizationByTeam(byNamespace, teams)
		return cmp.Equal(want, got), err
	})
	// Over the last hour: each GPU's readings since its pod started, the
	// same, one reading a GPU.
	wantGPUs := map[string][]float64{"vision": {85}, "nlp": {30, 30}}
	var gotGPUs map[string][]float64
	poll(t, 30*time.Second, "pinned utilization never reached NamespaceGPUUtilizationOver", func(ctx context.Context) (bool, error) {
		byNamespace, err := p.NamespaceGPUUtilizationOver(ctx, time.Hour)
		gotGPUs = domain.GPUReadingsByTeam(byNamespace, teams)
		return cmp.Equal(wantGPUs, gotGPUs), err
	})
	// A GPU its pod no longer holds leaves the figure at once, though it has
	// readings within the hour: nlp's trainer ends, another takes one GPU.
	nlp := s.Namespace("nlp")
	if err := kube.CoreV1().Pods(nlp).Delete(ctx, "trainer", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Pods(nlp).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer-2", Annotations: map[string]string{sandbox.GPUUtilAnnotation: "60"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "trainer",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{sandbox.ResourceGPU: *resource.NewQuantity(1, resource.DecimalSI)}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantGPUs = map[string][]float64{"vision": {85}, "nlp": {60}}
	poll(t, 60*time.Second, "the GPUs of a pod that ended stayed in NamespaceGPUUtilizationOver", func(ctx context.Context) (bool, error) {
		byNamespace, err := p.NamespaceGPUUtilizationOver(ctx, time.Hour)
		gotGPUs = domain.GPUReadingsByTeam(byNamespace, teams)
		return cmp.Equal(wantGPUs, gotGPUs), err
	})

	// The partitions' engine activity, by team and profile.
	wantPartitions := map[string]map[string]float64{"notebooks": {"mig-1g.10gb": 40}}
	var gotPartitions map[string]map[string]float64
	poll(t, 30*time.Second, "pinned utilization never reached NamespacePartitionUtilization", func(ctx context.Context) (bool, error) {
		byNamespace, err := p.NamespacePartitionUtilization(ctx)
		gotPartitions = domain.PartitionUtilizationByTeam(byNamespace, teams)
		return cmp.Equal(wantPartitions, gotPartitions), err
	})

	// The cluster charts over the last hour have GPU samples (the sandbox's
	// GPUs have been reported since it started).
	poll(t, 30*time.Second, "cluster charts stayed empty", func(ctx context.Context) (bool, error) {
		r, _ := RangeFor("1h", time.Now())
		c, err := p.ClusterUtilization(ctx, r, 1000)
		if err != nil {
			return false, err
		}
		// Hardware readings are percentages; what Kueue admitted may exceed
		// the nodes' capacity (quotas beyond the hardware, as other tests on
		// the shared sandbox make), never go below zero.
		for _, s := range []Series{c.GPUUtilization, c.GPUMemory, c.VCPUAllocation} {
			upper := 100.0
			if s.Name == c.VCPUAllocation.Name {
				upper = math.Inf(1)
			}
			for _, pt := range s.Points {
				if pt.V < 0 || pt.V > upper || math.IsNaN(pt.V) {
					return false, fmt.Errorf("%s: %v is out of range", s.Name, pt.V)
				}
			}
		}
		return len(c.GPUUtilization.Points) > 0 && len(c.GPUMemory.Points) > 0, nil
	})
}

func TestSandboxTeamSeriesAndUsageReportShowBorrowing(t *testing.T) {
	p, kube, kq := sandboxClients(t)
	ctx := context.Background()
	s := isolated()
	gpus := func(v int64) *int64 { return &v }
	lender := domain.Team{Name: "lender", Enabled: true, Preemption: domain.PreemptNever,
		Lending: domain.LendAndBorrow, BorrowLimitPercent: 50,
		Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: gpus(4)}}}
	borrower := lender
	borrower.Name = "borrower"
	borrower.Quota = []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: gpus(2)}}
	for _, team := range []domain.Team{lender, borrower} {
		objs, err := domain.BuildTeam(s, team, domain.LookupShape)
		if err != nil {
			t.Fatal(err)
		}
		if err := (kueue.Applier{Kube: kube, Kueue: kq}).ApplyTeam(ctx, objs); err != nil {
			t.Fatalf("apply team %s: %v", team.Name, err)
		}
		t.Cleanup(func() {
			_ = kube.CoreV1().Namespaces().Delete(context.Background(), s.Namespace(team.Name), metav1.DeleteOptions{})
			_ = kq.KueueV1beta2().ClusterQueues().Delete(context.Background(), s.ClusterQueue(team.Name), metav1.DeleteOptions{})
		})
	}
	// 3 GPUs on a quota of 2: Kueue admits it by borrowing 1 from the lender.
	res := corev1.ResourceList{
		domain.ResourceGPU:    resource.MustParse("3"),
		corev1.ResourceCPU:    resource.MustParse("1"),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Labels: map[string]string{"kueue.x-k8s.io/queue-name": s.LocalQueue("borrower")}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}},
		}}},
	}
	if _, err := kube.BatchV1().Jobs(s.Namespace("borrower")).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	last := func(s Series) float64 {
		if len(s.Points) == 0 {
			return math.NaN()
		}
		return s.Points[len(s.Points)-1].V
	}
	var c TeamCharts
	poll(t, 90*time.Second, "borrower's charts never showed quota 2, in use 3, borrowed 1", func(ctx context.Context) (bool, error) {
		r, _ := RangeFor("1h", time.Now())
		var err error
		c, err = p.TeamSeries(ctx, TeamQueue{ClusterQueue: s.ClusterQueue("borrower"), Namespaces: []string{s.Namespace("borrower")}}, r)
		return last(c.Quota) == 2 && last(c.InUse) == 3 && last(c.Borrowed) == 1, err
	})
	r, _ := RangeFor("1h", time.Now())
	lc, err := p.TeamSeries(ctx, TeamQueue{ClusterQueue: s.ClusterQueue("lender"), Namespaces: []string{s.Namespace("lender")}}, r)
	if err != nil {
		t.Fatal(err)
	}
	if last(lc.Quota) != 4 || last(lc.InUse) != 0 || last(lc.Borrowed) != 0 {
		t.Errorf("lender: quota %v in use %v borrowed %v, want 4, 0, 0", last(lc.Quota), last(lc.InUse), last(lc.Borrowed))
	}

	// The report, sampled every 5 s so that the last minute shows: what the
	// borrower borrows, the lender (alone in the cohort with idle quota) lent.
	p.ReportStep = 5 * time.Second
	// A day's queues at that step, on a shared sandbox that has seen many
	// tests' queues since midnight, take Prometheus seconds to read.
	p.Timeout = 30 * time.Second
	byTeam := map[string]UsageRow{}
	poll(t, 60*time.Second, "usage report never showed the borrowing", func(ctx context.Context) (bool, error) {
		now := time.Now()
		report, err := p.UsageReport(ctx, s, nil, now.Add(-time.Hour), now)
		if err != nil {
			return false, err
		}
		byTeam = map[string]UsageRow{}
		for _, row := range report.Rows {
			sum := byTeam[row.Team]
			sum.Team = row.Team
			sum.GPUHoursAllocated += row.GPUHoursAllocated
			sum.GPUHoursUsed += row.GPUHoursUsed
			sum.GPUHoursBorrowed += row.GPUHoursBorrowed
			sum.GPUHoursLent += row.GPUHoursLent
			byTeam[row.Team] = sum
		}
		return byTeam["borrower"].GPUHoursBorrowed > 0, nil
	})
	// Other tests' queues share the sandbox's Prometheus; each queue is a
	// row of its own, whoever made it.
	if _, ok := byTeam["lender"]; !ok {
		t.Errorf("report teams %v, want the lender among them", byTeam)
	}
	b, l := byTeam["borrower"], byTeam["lender"]
	t.Logf("GPU-hours: borrower %+v; lender %+v", b, l)
	if math.Abs(b.GPUHoursBorrowed-l.GPUHoursLent) > 1e-9 {
		t.Errorf("borrower borrowed %v GPU-hours, lender lent %v", b.GPUHoursBorrowed, l.GPUHoursLent)
	}
	if b.GPUHoursAllocated <= 0 || l.GPUHoursAllocated <= b.GPUHoursAllocated || b.GPUHoursUsed < 3*b.GPUHoursBorrowed-1e-9 || l.GPUHoursUsed != 0 || l.GPUHoursBorrowed != 0 {
		t.Errorf("report: borrower %+v, lender %+v", b, l)
	}
}

// Every query's outcome is counted: answered, Prometheus unavailable, or a
// query it rejected; the three series exist from the start.
func TestQueriesAreCountedByOutcome(t *testing.T) {
	c := NewConsole()
	counts := func() string {
		var out []string
		for _, o := range []string{PromOK, PromUnavailable, PromError} {
			n, err := testutil.GatherAndCount(c.Registry, "quota_console_prometheus_queries_total")
			if err != nil || n != 3 {
				t.Fatalf("%d series, %v; want 3", n, err)
			}
			out = append(out, fmt.Sprintf("%s=%g", o, valueOf(t, c, "quota_console_prometheus_queries_total", "outcome", o)))
		}
		return strings.Join(out, " ")
	}
	ok, _ := fakeProm(t, http.StatusOK, func(string) string {
		return `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1782864000,"1"]}]}}`
	})
	down, _ := fakeProm(t, http.StatusServiceUnavailable, func(string) string { return "overloaded" })
	bad, _ := fakeProm(t, http.StatusBadRequest, func(string) string {
		return `{"status":"error","errorType":"bad_data","error":"1:5: parse error"}`
	})
	// One console counts for one Prom: these three stand for one Prometheus
	// that answers, is down, and rejects a query.
	c.ObservePrometheus(ok)
	down.observe, bad.observe = ok.observe, ok.observe
	if got := counts(); got != "ok=0 unavailable=0 error=0" {
		t.Errorf("before any query: %s", got)
	}
	for range 2 {
		if err := ok.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := down.Ping(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("503: %v", err)
	}
	if _, err := bad.instant(context.Background(), "up"); err == nil {
		t.Error("bad_data accepted")
	}
	if got := counts(); got != "ok=2 unavailable=1 error=1" {
		t.Errorf("after the queries: %s", got)
	}
	// Without a URL nothing is sent, so nothing is counted.
	none, _ := NewProm("")
	none.observe = ok.observe
	_ = none.Ping(context.Background())
	if got := counts(); got != "ok=2 unavailable=1 error=1" {
		t.Errorf("after a query without a URL: %s", got)
	}
}
