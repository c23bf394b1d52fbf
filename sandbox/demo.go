package sandbox

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
)

// DemoPolicy is the demo's cluster policy: task ranking with four classes.
var DemoPolicy = domain.Policy{
	Prioritization: domain.TaskRanking,
	IdleAllocation: domain.IdleFairShare,
	Classes: []domain.PriorityClass{
		{Name: "inference", Weight: 90},
		{Name: "training", Weight: 60},
		{Name: "experimentation", Weight: 30},
		{Name: "batch", Weight: 10},
	},
}

// DemoTeams are five teams sharing the fleet in one cohort; together they ask
// for more than the fleet has, so there is queueing and preemption, while
// speech rarely uses its ml.p5 GPUs and so lends them to the others.
func DemoTeams() []domain.Team {
	n := func(v int64) *int64 { return &v }
	return []domain.Team{
		{Name: "ml-research", Description: "Foundation model pre-training", Enabled: true, FairShareWeight: 30,
			Preemption: domain.PreemptLowerPriority, Lending: domain.LendAndBorrow, BorrowLimitPercent: 50,
			Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: n(12)}}},
		{Name: "nlp", Description: "Language models fine-tuning and evaluation", Enabled: true, FairShareWeight: 20,
			Preemption: domain.PreemptLowerPriority, Lending: domain.LendAndBorrow, BorrowLimitPercent: 100,
			Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: n(8)}, {InstanceType: "ml.g5.2xlarge", GPUs: n(2)}}},
		{Name: "vision", Description: "Image and video models", Enabled: true, FairShareWeight: 20,
			Preemption: domain.PreemptLowerPriority, Lending: domain.LendAndBorrow, BorrowLimitPercent: 50,
			Quota: []domain.QuotaInput{{InstanceType: "ml.g6.12xlarge", Count: n(2)}, {InstanceType: "ml.p5.48xlarge", GPUs: n(4)}}},
		{Name: "speech", Description: "Speech recognition on Trainium", Enabled: true, FairShareWeight: 10,
			Preemption: domain.PreemptNever, Lending: domain.Lend, BorrowLimitPercent: 50,
			Quota: []domain.QuotaInput{{InstanceType: "ml.trn1.32xlarge", Neuron: n(32)}, {InstanceType: "ml.p5.48xlarge", GPUs: n(8)}}},
		{Name: "data-platform", Description: "Data preparation (CPU only)", Enabled: true, FairShareWeight: 0,
			Preemption: domain.PreemptNever, Lending: domain.DontLend, BorrowLimitPercent: 50,
			Quota: []domain.QuotaInput{{InstanceType: "ml.c5.2xlarge", VCPU: n(16)}}},
	}
}

func (in *instance) seedDemo(ctx context.Context, _ pki) error {
	c, err := in.clients()
	if err != nil {
		return err
	}
	cfg, kube, kq := c.rest, c.kube, c.kueue
	// The console's install: its roles (the team member role the demo teams'
	// members are bound to) and the admission policy for admins.
	if err := rbac.Apply(ctx, cfg, "quota-console-sandbox"); err != nil {
		return err
	}
	a := kueue.Applier{Kube: kube, Kueue: kq}
	if err := a.ApplyPolicy(ctx, domain.DefaultSettings, DemoPolicy); err != nil {
		return err
	}
	for _, t := range DemoTeams() {
		objs, err := domain.BuildTeam(domain.DefaultSettings, t, domain.LookupShape)
		if err != nil {
			return err
		}
		if err := a.ApplyTeam(ctx, objs); err != nil {
			return err
		}
	}
	return nil
}

// demoJob is one kind of task a demo team submits.
type demoJob struct {
	instanceType string
	gpus, neuron int64
	cpu          int64
	memGiB       int64
}

var demoJobs = map[string][]demoJob{
	"ml-research": {{instanceType: "ml.p5.48xlarge", gpus: 8, cpu: 160, memGiB: 1600}, {instanceType: "ml.p5.48xlarge", gpus: 4, cpu: 80, memGiB: 800}},
	"nlp":         {{instanceType: "ml.p5.48xlarge", gpus: 2, cpu: 40, memGiB: 400}, {instanceType: "ml.p5.48xlarge", gpus: 4, cpu: 80, memGiB: 800}, {instanceType: "ml.g5.2xlarge", gpus: 1, cpu: 6, memGiB: 24}},
	"vision":      {{instanceType: "ml.g6.12xlarge", gpus: 2, cpu: 20, memGiB: 80}, {instanceType: "ml.g6.12xlarge", gpus: 4, cpu: 40, memGiB: 160}, {instanceType: "ml.p5.48xlarge", gpus: 2, cpu: 40, memGiB: 400}},
	// speech mostly trains on Trainium: its ml.p5 quota sits idle and is lent.
	"speech": {{instanceType: "ml.trn1.32xlarge", neuron: 8, cpu: 60, memGiB: 240}, {instanceType: "ml.trn1.32xlarge", neuron: 4, cpu: 30, memGiB: 120},
		{instanceType: "ml.trn1.32xlarge", neuron: 8, cpu: 60, memGiB: 240}, {instanceType: "ml.p5.48xlarge", gpus: 1, cpu: 20, memGiB: 200}},
	"data-platform": {{instanceType: "ml.c5.2xlarge", cpu: 4, memGiB: 8}},
}

// runDemoLoad submits a job every few seconds to a random team while that
// team has fewer than six tasks waiting, with run times of one to six minutes.
func runDemoLoad(ctx context.Context, kube kubernetes.Interface, log io.Writer) error {
	teams := DemoTeams()
	tick := time.NewTicker(4 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		team := teams[rand.IntN(len(teams))]
		ns := domain.DefaultSettings.Namespace(team.Name)
		jobs, err := kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{"demo": "true"}.String()})
		if err != nil {
			fmt.Fprintln(log, "demo load:", err)
			continue
		}
		suspended := 0
		for _, j := range jobs.Items {
			if ptr.Deref(j.Spec.Suspend, false) {
				suspended++
			}
		}
		if suspended >= 6 {
			continue
		}
		if _, err := kube.BatchV1().Jobs(ns).Create(ctx, DemoJob(team.Name), metav1.CreateOptions{}); err != nil {
			fmt.Fprintln(log, "demo load:", err)
		}
	}
}

// DemoJob is a job of the kind the demo's team submits (labelled
// demo=true, in its LocalQueue): one of the team's shapes, of a random class,
// running one to six minutes; nil for a team the demo does not have.
func DemoJob(team string) *batchv1.Job {
	kinds := demoJobs[team]
	if len(kinds) == 0 {
		return nil
	}
	kind := kinds[rand.IntN(len(kinds))]
	class := DemoPolicy.Classes[rand.IntN(len(DemoPolicy.Classes))].Name
	runFor := time.Duration(60+rand.IntN(300)) * time.Second
	return demoJobObject(team, domain.DefaultSettings.Namespace(team), class, kind, runFor)
}

func demoJobObject(team, ns, class string, kind demoJob, runFor time.Duration) *batchv1.Job {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(kind.cpu, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", kind.memGiB)),
	}
	if kind.gpus > 0 {
		res[ResourceGPU] = *resource.NewQuantity(kind.gpus, resource.DecimalSI)
	}
	if kind.neuron > 0 {
		res[ResourceNeuron] = *resource.NewQuantity(kind.neuron, resource.DecimalSI)
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: team + "-" + class + "-",
			Namespace:    ns,
			Labels: map[string]string{
				"kueue.x-k8s.io/queue-name":     domain.DefaultSettings.LocalQueue(team),
				"kueue.x-k8s.io/priority-class": class,
				"demo":                          "true",
			},
		},
		Spec: batchv1.JobSpec{
			Suspend:                 ptr.To(true),
			BackoffLimit:            ptr.To[int32](0),
			TTLSecondsAfterFinished: ptr.To[int32](600),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{PodCompleteDelay: runFor.String()}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "trainer", Image: "registry.local/" + team + "/trainer:latest",
						Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
					}},
				},
			},
		},
	}
}
