package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openquota/console/internal/loopback"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// Probe Workloads: a priority class of their own, and a resource no
// ClusterQueue has, so they stay pending and each one raises the pending
// count of its class and team by exactly one.
const (
	defaultProbeClass = "loadtest-probe"
	probeLabel        = "loadtest.openquota.dev/probe"
	probeResource     = corev1.ResourceName("loadtest.openquota.dev/probe")
	// probePriority sits between the load data's classes (10 to 90), so the
	// lowest class, where Workloads naming none are counted, stays theirs.
	probePriority = 20
)

// sandboxEnv is what `sandbox up` prints.
type sandboxEnv = loopback.Sandbox

func sandboxUp(ctx context.Context, bin, instance string) (sandboxEnv, error) {
	return loopback.SandboxUp(ctx, bin, instance)
}

// fill runs the load generator: teams and Workloads load-000000 onwards
// (it skips those that exist, so it also tops up a smaller fill).
func fill(ctx context.Context, bin, kubeconfig string, teams, workloads int) error {
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig", kubeconfig,
		"--teams", strconv.Itoa(teams), "--workloads", strconv.Itoa(workloads))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	return nil
}

// teamQueue is a team as the load data lays it out: a namespace and the
// LocalQueue its Workloads go to.
type teamQueue struct{ Name, Namespace, LocalQueue string }

// cluster is the tool's client of the sandbox.
type cluster struct {
	kq         kueueclient.Interface
	prefix     string // team namespaces are <prefix><team>
	probeClass string // the probes' WorkloadPriorityClass
}

func newCluster(kubeconfig, namespacePrefix string) (*cluster, error) {
	cfg, err := loopback.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	kq, err := kueueclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &cluster{kq: kq, prefix: namespacePrefix, probeClass: defaultProbeClass}, nil
}

// countWorkloads counts every Workload without listing them all.
func (c *cluster) countWorkloads(ctx context.Context) (int, error) {
	list, err := c.kq.KueueV1beta2().Workloads("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("counting Workloads: %w", err)
	}
	n := len(list.Items)
	if list.RemainingItemCount != nil {
		n += int(*list.RemainingItemCount)
	}
	return n, nil
}

// teams lists the teams with a LocalQueue in a team namespace, by name.
func (c *cluster) teams(ctx context.Context) ([]teamQueue, error) {
	lqs, err := c.kq.KueueV1beta2().LocalQueues("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing LocalQueues: %w", err)
	}
	seen := map[string]bool{}
	var out []teamQueue
	for _, lq := range lqs.Items {
		name, ok := strings.CutPrefix(lq.Namespace, c.prefix)
		if !ok || name == "" || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, teamQueue{Name: name, Namespace: lq.Namespace, LocalQueue: lq.Name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ensureProbeClass creates the probes' WorkloadPriorityClass.
func (c *cluster) ensureProbeClass(ctx context.Context) error {
	_, err := c.kq.KueueV1beta2().WorkloadPriorityClasses().Create(ctx, &kueuev1beta2.WorkloadPriorityClass{
		ObjectMeta:  metav1.ObjectMeta{Name: c.probeClass, Labels: map[string]string{probeLabel: "true"}},
		Value:       probePriority,
		Description: "Workloads the load test creates to time live updates; they never fit a ClusterQueue.",
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating WorkloadPriorityClass %s: %w", c.probeClass, err)
	}
	return nil
}

// deleteProbeClass removes the probes' class once they are gone.
func (c *cluster) deleteProbeClass(ctx context.Context) error {
	err := c.kq.KueueV1beta2().WorkloadPriorityClasses().Delete(ctx, c.probeClass, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// deleteProbes deletes every probe Workload, of this run or an earlier one
// that was interrupted, and returns how many there were.
func (c *cluster) deleteProbes(ctx context.Context) (int, error) {
	sel := metav1.ListOptions{LabelSelector: probeLabel}
	list, err := c.kq.KueueV1beta2().Workloads("").List(ctx, sel)
	if err != nil {
		return 0, fmt.Errorf("listing probe Workloads: %w", err)
	}
	namespaces := map[string]bool{}
	for _, wl := range list.Items {
		namespaces[wl.Namespace] = true
	}
	for ns := range namespaces {
		if err := c.kq.KueueV1beta2().Workloads(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
			return 0, fmt.Errorf("deleting probe Workloads in %s: %w", ns, err)
		}
	}
	return len(list.Items), nil
}

// createProbe creates one probe Workload in t.
func (c *cluster) createProbe(ctx context.Context, t teamQueue, name string) error {
	priority := int32(probePriority)
	wl := &kueuev1beta2.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.Namespace, Labels: map[string]string{probeLabel: "true"}},
		Spec: kueuev1beta2.WorkloadSpec{
			QueueName:        kueuev1beta2.LocalQueueName(t.LocalQueue),
			PriorityClassRef: &kueuev1beta2.PriorityClassRef{Group: "kueue.x-k8s.io", Kind: "WorkloadPriorityClass", Name: c.probeClass},
			Priority:         &priority,
			PodSets: []kueuev1beta2.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "probe", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{probeResource: resource.MustParse("1")},
				}}},
			}}}},
		},
	}
	_, err := c.kq.KueueV1beta2().Workloads(t.Namespace).Create(ctx, wl, metav1.CreateOptions{})
	return err
}

// probe is one probe Workload the tool created.
type probe struct {
	Team string
	Sent time.Time     // when the create request left
	Took time.Duration // until the apiserver answered
}

// prober creates probes at a steady rate, round robin over teams. Creates
// run concurrently, so a slow apiserver does not slow the rate.
type prober struct {
	c     *cluster
	runID string

	mu       sync.Mutex
	seq      int
	failed   int
	firstErr error
}

// maxCreatesInFlight bounds the concurrent creates; a tick that finds them
// all busy counts as a failed create.
const maxCreatesInFlight = 32

// run creates probes at rate per second for d (or until ctx ends) and
// returns those it created, in the order they were sent.
func (p *prober) run(ctx context.Context, teams []teamQueue, rate float64, d time.Duration) []probe {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	end := time.After(d)
	slots := make(chan struct{}, maxCreatesInFlight)
	var wg sync.WaitGroup
	var made []probe
	for i := 0; ; i++ {
		select {
		case slots <- struct{}{}:
			p.mu.Lock()
			p.seq++
			name := fmt.Sprintf("probe-%s-%05d", p.runID, p.seq)
			p.mu.Unlock()
			wg.Add(1)
			go func(t teamQueue) {
				defer wg.Done()
				defer func() { <-slots }()
				sent := time.Now()
				err := p.c.createProbe(ctx, t, name)
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.record(ctx, err)
					return
				}
				made = append(made, probe{Team: t.Name, Sent: sent, Took: time.Since(sent)})
			}(teams[i%len(teams)])
		default:
			p.mu.Lock()
			p.record(ctx, fmt.Errorf("%d creates in flight already", maxCreatesInFlight))
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-end:
		case <-tick.C:
			continue
		}
		wg.Wait()
		sort.Slice(made, func(a, b int) bool { return made[a].Sent.Before(made[b].Sent) })
		return made
	}
}

// record counts a failed create (p.mu held).
func (p *prober) record(ctx context.Context, err error) {
	p.failed++
	if p.firstErr == nil && ctx.Err() == nil {
		p.firstErr = err
	}
}

// failures says how many creates failed and the first error.
func (p *prober) failures() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed, p.firstErr
}
