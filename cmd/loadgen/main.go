// Command loadgen fills a sandbox with teams and Workloads, to measure the
// console at the size it is designed for (200 teams, 50 000 Workloads):
//
//	bin/sandbox up --instance load
//	go run ./cmd/loadgen --kubeconfig ~/.cache/quota-console-sandbox/state/load/kubeconfig
//
// Teams are written through the console's apply path; Workloads are created
// directly (no Jobs, so no pods), spread over the teams and four priority
// classes. Kueue admits what fits the quotas and queues the rest.
//
// It talks to the console's binary and to the cluster, never to an in-process
// console: it must not import the console's web side (internal/app,
// internal/handlers, web), its write path, task history or sign-in.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
)

func main() {
	fs := flag.NewFlagSet("loadgen", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the sandbox to fill")
	teams := fs.Int("teams", 200, "teams to create")
	workloads := fs.Int("workloads", 50_000, "Workloads to create (bounded: at most 100 000)")
	workers := fs.Int("workers", 16, "parallel creates")
	_ = fs.Parse(os.Args[1:])
	if *workloads > 100_000 || *teams > 1000 {
		log.Fatal("refusing more than 100 000 Workloads or 1000 teams")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	kube, kq := kubernetes.NewForConfigOrDie(cfg), kueueclient.NewForConfigOrDie(cfg)
	ctx := context.Background()
	a := kueue.Applier{Kube: kube, Kueue: kq}
	s := domain.DefaultSettings

	start := time.Now()
	policy := domain.Policy{Prioritization: domain.TaskRanking, IdleAllocation: domain.IdleFairShare, Classes: []domain.PriorityClass{
		{Name: "inference", Weight: 90}, {Name: "training", Weight: 60}, {Name: "experimentation", Weight: 30}, {Name: "batch", Weight: 10}}}
	if err := a.ApplyPolicy(ctx, s, policy); err != nil {
		log.Fatal(err)
	}
	gpus := int64(8)
	for i := 0; i < *teams; i++ {
		t := domain.Team{Name: fmt.Sprintf("team-%03d", i), Enabled: true, FairShareWeight: 10, Preemption: domain.PreemptLowerPriority,
			Lending: domain.LendAndBorrow, BorrowLimitPercent: 50, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: &gpus}}}
		objs, err := domain.BuildTeam(s, t, domain.LookupShape)
		if err != nil {
			log.Fatal(err)
		}
		if err := a.ApplyTeam(ctx, objs); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("%d teams in %s", *teams, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	var created, failed atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				class := policy.Classes[i%len(policy.Classes)]
				if err := createWorkload(ctx, kq, s, i, *teams, class); err != nil && !apierrors.IsAlreadyExists(err) {
					if failed.Add(1) <= 5 {
						log.Printf("workload %d: %v", i, err)
					}
					continue
				}
				if n := created.Add(1); n%5000 == 0 {
					log.Printf("%d workloads (%.0f/s)", n, float64(n)/time.Since(start).Seconds())
				}
			}
		}()
	}
	for i := 0; i < *workloads; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	log.Printf("%d workloads created, %d failed, in %s", created.Load(), failed.Load(), time.Since(start).Round(time.Millisecond))
}

func createWorkload(ctx context.Context, kq kueueclient.Interface, s domain.Settings, i, teams int, class domain.PriorityClass) error {
	team := fmt.Sprintf("team-%03d", i%teams)
	gpus := resource.NewQuantity(int64(1+i%4), resource.DecimalSI)
	wl := &kueuev1beta2.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("load-%06d", i), Namespace: s.Namespace(team)},
		Spec: kueuev1beta2.WorkloadSpec{
			QueueName: kueuev1beta2.LocalQueueName(s.LocalQueue(team)),
			// Kueue's job integrations fill both from the class; a bare Workload must.
			PriorityClassRef: &kueuev1beta2.PriorityClassRef{Group: "kueue.x-k8s.io", Kind: "WorkloadPriorityClass", Name: class.Name},
			Priority:         &class.Weight,
			PodSets: []kueuev1beta2.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{domain.ResourceGPU: *gpus, corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				}}},
			}}}},
		},
	}
	_, err := kq.KueueV1beta2().Workloads(wl.Namespace).Create(ctx, wl, metav1.CreateOptions{})
	return err
}
