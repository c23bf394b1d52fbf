package domain

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

const (
	c5   = "ml.c5.2xlarge"
	trn1 = "ml.trn1.32xlarge"
	mig  = corev1.ResourceName("nvidia.com/mig-1g.10gb")
)

// container asks for requests (and limits alone for what lim holds).
func container(name string, req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func list(kv ...any) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[kv[i].(corev1.ResourceName)] = resource.MustParse(kv[i+1].(string))
	}
	return l
}

// withoutFlavorOf is wl with no flavor assigned to r, as Kueue leaves a
// resource it is told to ignore.
func withoutFlavorOf(r corev1.ResourceName, wl *kueuev1beta2.Workload) *kueuev1beta2.Workload {
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		delete(psa.Flavors, r)
		delete(psa.ResourceUsage, r)
	}
	return wl
}

// The figures of a Workload are Kueue's: requests with init containers,
// sidecars, overhead and limits for missing requests, less reclaimable
// pods; while quota is reserved, the admission's usage per flavor. MIG
// slices count as no GPU.
func TestReadWorkloadFigures(t *testing.T) {
	cpu, mem := corev1.ResourceCPU, corev1.ResourceMemory
	workers := corev1.PodSpec{
		Containers: []corev1.Container{container("w", list(ResourceGPU, "8", cpu, "96", mem, "1Ti"), nil)},
		Overhead:   list(cpu, "1", mem, "1Gi"),
	}
	launcher := corev1.PodSpec{
		Containers:     []corev1.Container{container("l", list(cpu, "2", mem, "4Gi"), nil)},
		InitContainers: []corev1.Container{container("setup", list(cpu, "4"), nil)},
	}
	always := corev1.ContainerRestartPolicyAlways
	withSidecar := corev1.PodSpec{
		Containers:     []corev1.Container{container("main", list(ResourceGPU, "2", cpu, "1"), nil)},
		InitContainers: []corev1.Container{container("proxy", list(cpu, "500m", mem, "256Mi"), nil)},
	}
	withSidecar.InitContainers[0].RestartPolicy = &always
	cases := []struct {
		name     string
		wl       *kueuev1beta2.Workload
		podSets  []PodSetAmount
		requests Amount
		usage    []FlavorAmount
		gpus     int64
		flavors  []string
	}{
		{
			name:     "pending, with pod overhead",
			wl:       newWorkload(nlp, "a").Queue("lq").PodSpec("workers", 2, workers).Obj(),
			podSets:  []PodSetAmount{{Name: "workers", Count: 2, Amount: Amount{GPUs: 16, CPUMilli: 194_000, MemoryMiB: 2 * (1<<20 + 1024)}}},
			requests: Amount{GPUs: 16, CPUMilli: 194_000, MemoryMiB: 2 * (1<<20 + 1024)},
			gpus:     16,
		},
		{
			name: "admitted, two pod sets on two flavors",
			wl: newWorkload(nlp, "b").Queue("lq").PodSpec("launcher", 1, launcher).PodSpec("workers", 2, workers).
				AdmittedOn(at(1), map[string]string{"launcher": c5, "workers": p5}).Obj(),
			podSets: []PodSetAmount{
				{Name: "launcher", Count: 1, Amount: Amount{CPUMilli: 4000, MemoryMiB: 4096}},
				{Name: "workers", Count: 2, Amount: Amount{GPUs: 16, CPUMilli: 194_000, MemoryMiB: 2 * (1<<20 + 1024)}},
			},
			requests: Amount{GPUs: 16, CPUMilli: 198_000, MemoryMiB: 4096 + 2*(1<<20+1024)},
			usage: []FlavorAmount{
				{Flavor: c5, Amount: Amount{CPUMilli: 4000, MemoryMiB: 4096}},
				{Flavor: p5, Amount: Amount{GPUs: 16, CPUMilli: 194_000, MemoryMiB: 2 * (1<<20 + 1024)}},
			},
			gpus:    16,
			flavors: []string{p5},
		},
		{
			name:     "a sidecar runs beside the containers",
			wl:       newWorkload(nlp, "s").Queue("lq").PodSpec("main", 3, withSidecar).Obj(),
			podSets:  []PodSetAmount{{Name: "main", Count: 3, Amount: Amount{GPUs: 6, CPUMilli: 4500, MemoryMiB: 768}}},
			requests: Amount{GPUs: 6, CPUMilli: 4500, MemoryMiB: 768},
			gpus:     6,
		},
		{
			name: "MIG slices are not GPUs",
			wl: newWorkload(cv, "m").Queue("lq").PodSpec("main", 2, corev1.PodSpec{Containers: []corev1.Container{container("c", list(mig, "1", cpu, "1"), nil)}}).
				Admitted(at(1), p4d).Obj(),
			podSets:  []PodSetAmount{{Name: "main", Count: 2, Amount: Amount{CPUMilli: 2000}}},
			requests: Amount{CPUMilli: 2000},
			usage:    []FlavorAmount{{Flavor: p4d, Amount: Amount{CPUMilli: 2000}, Partitions: map[string]int64{"mig-1g.10gb": 2}}},
			flavors:  []string{p4d},
		},
		{
			name: "MIG partitions alone, a pod done for good",
			wl: newWorkload(cv, "m2").Queue("lq").PodSpec("main", 3, corev1.PodSpec{Containers: []corev1.Container{container("c", nil, list(mig, "2"))}}).
				Admitted(at(1), p4d).Reclaimable("main", 1).Obj(),
			podSets: []PodSetAmount{{Name: "main", Count: 2}},
			usage:   []FlavorAmount{{Flavor: p4d, Partitions: map[string]int64{"mig-1g.10gb": 4}}},
			flavors: []string{p4d},
		},
		{
			name: "MIG partitions Kueue assigns no flavor are held on none",
			wl: withoutFlavorOf(mig, newWorkload(cv, "m3").Queue("lq").
				PodSpec("main", 2, corev1.PodSpec{Containers: []corev1.Container{container("c", list(mig, "1", cpu, "1"), nil)}}).Admitted(at(1), p4d).Obj()),
			podSets:  []PodSetAmount{{Name: "main", Count: 2, Amount: Amount{CPUMilli: 2000}}},
			requests: Amount{CPUMilli: 2000},
			usage:    []FlavorAmount{{Flavor: p4d, Amount: Amount{CPUMilli: 2000}}},
			flavors:  []string{p4d},
		},
		{
			name: "Neuron devices asked for by limits",
			wl: newWorkload(cv, "n").Queue("lq").PodSpec("main", 2, corev1.PodSpec{Containers: []corev1.Container{container("c", nil, list(ResourceNeuron, "16", cpu, "4"))}}).
				Admitted(at(1), trn1).Obj(),
			podSets:  []PodSetAmount{{Name: "main", Count: 2, Amount: Amount{Neuron: 32, CPUMilli: 8000}}},
			requests: Amount{Neuron: 32, CPUMilli: 8000},
			usage:    []FlavorAmount{{Flavor: trn1, Amount: Amount{Neuron: 32, CPUMilli: 8000}}},
			flavors:  []string{trn1},
		},
		{
			name:     "pods done for good give their quota back",
			wl:       newWorkload(cv, "r").Queue("lq").GPUs(8, 4).Admitted(at(1), p5).Reclaimable("main", 1).Obj(),
			podSets:  []PodSetAmount{{Name: "main", Count: 3, Amount: Amount{GPUs: 24, CPUMilli: 3000}}},
			requests: Amount{GPUs: 24, CPUMilli: 3000},
			usage:    []FlavorAmount{{Flavor: p5, Amount: Amount{GPUs: 24, CPUMilli: 3000}}},
			gpus:     24,
			flavors:  []string{p5},
		},
		{
			name:     "a partial admission holds what Kueue recorded",
			wl:       newWorkload(cv, "p").Queue("lq").GPUs(8, 4).Admitted(at(1), p5).Usage("main", 2, 16).Obj(),
			podSets:  []PodSetAmount{{Name: "main", Count: 4, Amount: Amount{GPUs: 32, CPUMilli: 4000}}},
			requests: Amount{GPUs: 32, CPUMilli: 4000},
			usage:    []FlavorAmount{{Flavor: p5, Amount: Amount{GPUs: 16, CPUMilli: 4000}}},
			gpus:     16,
			flavors:  []string{p5},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ReadWorkload(tc.wl, DefaultSettings)
			type figures struct {
				PodSets  []PodSetAmount
				Requests Amount
				Usage    []FlavorAmount
				GPUs     int64
				Flavors  []string
			}
			want := figures{tc.podSets, tc.requests, tc.usage, tc.gpus, tc.flavors}
			got := figures{r.PodSets, r.Requests, r.Usage, r.GPUs, r.Flavors}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("figures (-want +got):\n%s", diff)
			}
			// The live read model keeps the same figures.
			f := FactsOf(tc.wl, DefaultSettings, "")
			if diff := cmp.Diff(figures{GPUs: r.GPUs, Flavors: r.Flavors, Usage: r.Usage}, figures{GPUs: f.GPUs, Flavors: f.Flavors, Usage: f.Usage}, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("FactsOf (-reading +facts):\n%s", diff)
			}
		})
	}
}

func TestParsePreemptor(t *testing.T) {
	cases := []struct {
		msg  string
		want Preemptor
	}{
		{"Preempted to accommodate a workload (UID: 1b2c, JobUID: 9f8e) due to prioritization in the ClusterQueue; preemptor path: /pool/a-clusterqueue; preemptee path: /pool/a-clusterqueue",
			Preemptor{UID: "1b2c", JobUID: "9f8e", ClusterQueue: "a-clusterqueue", Path: "/pool/a-clusterqueue"}},
		{"Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to UNKNOWN; preemptor path: UNKNOWN; preemptee path: UNKNOWN",
			Preemptor{}},
		{"Preempted to accommodate a workload (UID: u1, JobUID: UNKNOWN) due to Fair Sharing within the cohort; preemptor path: /root/mid/b; preemptee path: /root/c",
			Preemptor{UID: "u1", ClusterQueue: "b", Path: "/root/mid/b"}},
		{"Preempted to accommodate a workload due to reclamation within the cohort; preemptor path: /shared/x",
			Preemptor{ClusterQueue: "x", Path: "/shared/x"}},
		{"something else entirely", Preemptor{}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, ParsePreemptor(tc.msg)); diff != "" {
			t.Errorf("ParsePreemptor(%q) (-want +got):\n%s", tc.msg, diff)
		}
	}
}

func TestLabelsWord(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{"team": "nlp"}, "team=nlp"},
		{map[string]string{"team": "nlp", "app": "bert", "kueue.x-k8s.io/job-uid": "1a2b"}, "app=bert; kueue.x-k8s.io/job-uid=1a2b; team=nlp"},
	} {
		if diff := cmp.Diff(tc.want, LabelsWord(tc.labels)); diff != "" {
			t.Errorf("LabelsWord(%v) (-want +got):\n%s", tc.labels, diff)
		}
	}
}

// A new slice of an elastic job that waits says it grows a running job.
func TestAResizeWaitingSaysSo(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	wl := kueuetest.MakeWorkload(DefaultSettings, DefaultSettings.Namespace("team-000"), "job-elastic-2").Queue(DefaultSettings.LocalQueue("team-000")).
		GPUs(1, 4).Created(now).Annotation(kueuev1beta2.WorkloadSliceNameAnnotation, "job-elastic-1").
		Annotation("kueue.x-k8s.io/workload-slice-replacement-for", "hyperpod-ns-team-000/job-elastic-1").
		Pending(kueuev1beta2.WorkloadQuotaReservedReasonWaitingForQuota, "insufficient quota", now).Obj()
	r := ReadWorkload(wl, DefaultSettings)
	if want := "Growing a running elastic job (a new slice replaces its current one once admitted): "; !strings.HasPrefix(r.Reason, want) || r.Slice != "job-elastic-1" {
		t.Errorf("reason %q, slice %q; want it to start %q, in job-elastic-1's chain", r.Reason, r.Slice, want)
	}
}
