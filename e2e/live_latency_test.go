package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	krand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// pendingCounter is a script that, in the page, records each time the
// team's pending count shown by the page's live parts goes up: the count
// and the wall-clock time (the browser and the test share the machine's
// clock).
const pendingCounter = `([team, selector]) => {
	const count = () => {
		let n = 0;
		for (const el of document.querySelectorAll(selector)) n += Number(el.dataset.pending || 0);
		return n;
	};
	window.__seen = [];
	let last = count();
	window.__base = last;
	new MutationObserver(() => {
		const n = count();
		for (let k = last + 1; k <= n; k++) window.__seen.push(Date.now());
		if (n > last) last = n;
	}).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
}`

// Live updates, measured in a real browser: Workloads are created while
// four pages watch their team (the full Tasks page, the team's tasks, the
// usage table and the team's page), and each page's DOM is timed as it
// shows each one. It reports the latencies; every page must show every
// Workload (the target, 1 s at the 95th percentile, is checked by the load
// benchmark at size, not asserted here).
func TestLiveUpdatesReachTheBrowser(t *testing.T) {
	env := sandboxEnv(t)
	c := testenv.SandboxClients(t, env)
	kube, kq := c.Kube, c.Kueue
	id := krand.String(5)
	s := domain.Settings{NamespacePrefix: "lat" + id + "-", Cohort: "latency-" + id}
	base := startConsole(t, env, "--namespace-prefix", s.NamespacePrefix, "--cohort", s.Cohort)
	ctx := context.Background()
	team := domain.Team{Name: "watched", Enabled: true, Lending: domain.LendAndBorrow, BorrowLimitPercent: 50,
		Preemption: domain.PreemptLowerPriority, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](8)}}}
	objs, err := domain.BuildTeam(s, team, domain.LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	a := kueue.Applier{Kube: kube, Kueue: kq}
	if err := a.ApplyTeam(ctx, objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.DeleteTeam(context.Background(), s, team.Name) })

	pages := []struct{ path, selector string }{
		{"/tasks", `#team-class-stats-watched [data-pending]`},
		{"/tasks?team=watched", `#class-stats [data-pending]`},
		{"/usage", `#team-usage tr[data-team="watched"] [data-pending]`},
		{"/usage/watched", `#team-summary`},
	}
	type watched struct {
		path string
		page interface {
			Evaluate(string, ...interface{}) (interface{}, error)
		}
	}
	var watching []watched
	for _, p := range pages {
		page := newPage(t)
		if _, err := page.Goto(base + p.path); err != nil {
			t.Fatal(err)
		}
		if _, err := page.Evaluate(pendingCounter, []string{team.Name, p.selector}); err != nil {
			t.Fatal(err)
		}
		watching = append(watching, watched{p.path, page})
	}
	time.Sleep(time.Second) // the streams open

	const probes = 10
	var sent []time.Time
	for i := range probes {
		wl := &kueuev1beta2.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", i), Namespace: s.Namespace(team.Name)},
			Spec: kueuev1beta2.WorkloadSpec{QueueName: kueuev1beta2.LocalQueueName(s.LocalQueue(team.Name)),
				PodSets: []kueuev1beta2.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "probe", Resources: corev1.ResourceRequirements{
						// a resource no ClusterQueue has: the probe stays pending
						Requests: corev1.ResourceList{"e2e.openquota.dev/probe": resource.MustParse("1")}}}},
				}}}}},
		}
		sent = append(sent, time.Now())
		if _, err := kq.KueueV1beta2().Workloads(wl.Namespace).Create(ctx, wl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}

	var all []time.Duration
	for _, w := range watching {
		deadline := time.Now().Add(30 * time.Second)
		var seen []float64
		for {
			v, err := w.page.Evaluate(`() => window.__seen`)
			if err != nil {
				t.Fatal(err)
			}
			seen = seen[:0]
			for _, x := range v.([]interface{}) {
				seen = append(seen, toFloat(x))
			}
			if len(seen) >= probes || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if len(seen) < probes {
			t.Errorf("%s showed %d of %d new Workloads within 30 s", w.path, len(seen), probes)
			continue
		}
		var lat []time.Duration
		for i := range probes {
			lat = append(lat, time.UnixMilli(int64(seen[i])).Sub(sent[i]))
		}
		t.Logf("%-22s change → page: %v", w.path, lat)
		all = append(all, lat...)
	}
	if len(all) > 0 {
		slices.Sort(all)
		t.Logf("all pages: p50 %v, p95 %v, max %v (%d changes)", all[len(all)/2], all[len(all)*95/100], all[len(all)-1], len(all))
	}
}

func toFloat(v interface{}) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	}
	return 0
}
