package domain

import (
	"cmp"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// WhatIf is a job someone asks about before submitting it: to team's
// queue, at a priority class, with pods of each instance type.
type WhatIf struct {
	Team, Class string
	// PodClassPriority is set when Class is a Kubernetes PriorityClass (a
	// Job's priorityClassName): the priority Kueue gives its tasks.
	PodClassPriority *int32
	Rows             []WhatIfRow
}

// WhatIfRow is the pods of one instance type: how many, and what each
// asks for (CPUMilli and MemoryMiB 0: the instance's share for its GPUs or
// Neuron devices, as the team form derives quotas).
type WhatIfRow struct {
	InstanceType string
	Pods         int32
	GPUs, Neuron int64
	CPUMilli     int64
	MemoryMiB    int64
}

// PodRequests are one pod's requests of the row on an instance of shape.
func (r WhatIfRow) PodRequests(shape InstanceShape) corev1.ResourceList {
	cpu, mem := r.CPUMilli, r.MemoryMiB
	if cpu == 0 || mem == 0 {
		in := QuotaInput{InstanceType: r.InstanceType}
		switch {
		case r.GPUs > 0:
			in.GPUs = &r.GPUs
		case r.Neuron > 0:
			in.Neuron = &r.Neuron
		}
		if in.GPUs != nil || in.Neuron != nil {
			q := DeriveQuota(in, shape)
			cpu, mem = cmp.Or(cpu, q.CPUMilli), cmp.Or(mem, q.MemoryMiB)
		}
	}
	out := corev1.ResourceList{}
	if r.GPUs > 0 {
		out[ResourceGPU] = *resource.NewQuantity(r.GPUs, resource.DecimalSI)
	}
	if r.Neuron > 0 {
		out[ResourceNeuron] = *resource.NewQuantity(r.Neuron, resource.DecimalSI)
	}
	if cpu > 0 {
		out[corev1.ResourceCPU] = *resource.NewMilliQuantity(cpu, resource.DecimalSI)
	}
	if mem > 0 {
		out[corev1.ResourceMemory] = *resource.NewQuantity(mem*1024*1024, resource.BinarySI)
	}
	return out
}

// GPUs are what the job asks for in all.
func (w WhatIf) GPUs() int64 {
	var n int64
	for _, r := range w.Rows {
		n += r.GPUs * int64(r.Pods)
	}
	return n
}

// WhatIfAnswer is what Kueue would do with the job if it were submitted
// now.
type WhatIfAnswer struct {
	Admitted bool
	// Borrowing: the team holds more than its quota once it runs.
	Borrowing bool
	// Preempts are the tasks Kueue would preempt to make room.
	Preempts []ImpactTask
	// Position is its place in its team's queue while it waits, from 1.
	Position int
	// Reason is Kueue's reason while it waits, in Kueue's words.
	Reason string
	// Uncertain says what the answer cannot know.
	Uncertain string
	// Kueue is how it was computed.
	Kueue string
	// LocalQueue is the LocalQueue ("namespace/name") the job was asked
	// about in, the first of the team's LocalQueues of its ClusterQueue.
	LocalQueue  string
	LocalQueues int
}

// AskedIn says which LocalQueue the answer is for, and that another of the
// team's may be placed otherwise (Kueue may order by each LocalQueue's
// recent use).
func (a WhatIfAnswer) AskedIn() string {
	if a.LocalQueue == "" {
		return ""
	}
	if a.LocalQueues > 1 {
		return fmt.Sprintf("Asked for a job in LocalQueue %s, the first of the %d that feed the team's ClusterQueue; in another one its place may differ.", a.LocalQueue, a.LocalQueues)
	}
	return "Asked for a job in LocalQueue " + a.LocalQueue + "."
}

// AssumingDefaults notes on the answer that Kueue's configuration could
// not be read (KueueDefaultsAssumed).
func (a *WhatIfAnswer) AssumingDefaults() {
	a.Uncertain = strings.TrimSpace(a.Uncertain + " " + KueueDefaultsAssumed)
}

// CannotStart says why the job would wait while the team's queue stays as
// it is defined, in words: Kueue found the queue can never hold it
// (cannotFit); "" when it would start, or may once others finish.
func (a WhatIfAnswer) CannotStart() string {
	if a.Admitted || !cannotFit(a.Reason) {
		return ""
	}
	return quotaReason("", a.Reason)
}

// Verdict is the answer in one sentence.
func (a WhatIfAnswer) Verdict() string {
	switch {
	case a.CannotStart() != "":
		return "It would not start: the team's queue, as it is defined, can never hold it."
	case a.Admitted && len(a.Preempts) > 0:
		return fmt.Sprintf("It would start now, by preempting %s.", plural(fmt.Sprint(len(a.Preempts)), "task"))
	case a.Admitted && a.Borrowing:
		return "It would start now, on quota borrowed from other teams."
	case a.Admitted:
		return "It would start now, within the team's quota."
	}
	return fmt.Sprintf("It would wait, at position %d in its team's queue.", a.Position)
}
