package form

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/openquota/console/internal/domain"
)

// MaxWhatIfPods is how many pods one row of a what-if may have.
const MaxWhatIfPods = 1000

// WhatIfRow is one row of the what-if form as typed: pods of one instance
// type, and what each pod asks for.
type WhatIfRow struct {
	InstanceType, Pods, GPUs, Neuron, VCPU, MemoryGiB string
}

func (r WhatIfRow) empty() bool {
	return r == WhatIfRow{}
}

// WhatIfForm is the what-if form as typed: a job someone may submit, to
// ask what Kueue would do with it now.
type WhatIfForm struct {
	Team, Class string
	Rows        []WhatIfRow
}

// ParseWhatIf reads the what-if form from its query. Rows come as
// row.N.field; blank rows are dropped.
func ParseWhatIf(v url.Values) WhatIfForm {
	f := WhatIfForm{Team: strings.TrimSpace(v.Get("team")), Class: strings.TrimSpace(v.Get("class"))}
	for i := 0; i < MaxQuotaRows*2; i++ {
		p := fmt.Sprintf("row.%d.", i)
		row := WhatIfRow{
			InstanceType: strings.TrimSpace(v.Get(p + "instanceType")),
			Pods:         strings.TrimSpace(v.Get(p + "pods")),
			GPUs:         strings.TrimSpace(v.Get(p + "gpus")),
			Neuron:       strings.TrimSpace(v.Get(p + "neuron")),
			VCPU:         strings.TrimSpace(v.Get(p + "vcpu")),
			MemoryGiB:    strings.TrimSpace(v.Get(p + "memoryGiB")),
		}
		if !row.empty() {
			f.Rows = append(f.Rows, row)
		}
	}
	return f
}

// WhatIfChoices are what a what-if may name.
type WhatIfChoices struct {
	// Teams are the teams the viewer may ask about, those of the
	// ClusterQueues the console does not manage too; SeesAll says they are
	// every team (a platform viewer), so a team not among them does not
	// exist.
	Teams   []string
	SeesAll bool
	// Classes are the cluster's priority classes (domain.Snapshot.Classes);
	// PodClasses those of them that are Kubernetes PriorityClasses, with
	// the priority Kueue gives their tasks.
	Classes    []string
	PodClasses map[string]int32
	Shapes     domain.ShapeLookup
	// Flavors are the ResourceFlavors of the viewer's queues that are no
	// instance type (a queue as Kueue's examples make it): a row may name
	// one, with what each pod asks for typed, as nothing derives it.
	Flavors []string
}

// Most one pod may ask for on a flavor that is no instance type, whose
// instances the console does not know.
const (
	maxFlavorGPUs      = 64
	maxFlavorVCPU      = 1024
	maxFlavorMemoryGiB = 16384
)

// Validate checks the form and converts it.
func (f WhatIfForm) Validate(c WhatIfChoices) (domain.WhatIf, Errors) {
	var errs Errors
	job := domain.WhatIf{Team: f.Team, Class: f.Class}
	switch {
	case f.Team == "":
		errs.Add("team", "Choose a team.")
	case slices.Contains(c.Teams, f.Team):
	case c.SeesAll:
		errs.Add("team", fmt.Sprintf("There is no team %q.", truncate(f.Team, 64)))
	default:
		// Whether the team exists is not theirs to know either.
		errs.Add("team", fmt.Sprintf("You cannot see team %q.", truncate(f.Team, 64)))
	}
	switch {
	case f.Class == "" || slices.Contains(c.Classes, f.Class):
		if priority, ok := c.PodClasses[f.Class]; ok {
			job.PodClassPriority = &priority
		}
	case len(c.Classes) == 0:
		errs.Add("class", "The cluster has no priority classes: leave the class empty.")
	default:
		errs.Add("class", "Choose one of the cluster's priority classes, or none.")
	}
	switch {
	case len(f.Rows) > MaxQuotaRows:
		errs.Add("rows", fmt.Sprintf("Use at most %d rows.", MaxQuotaRows))
	case len(f.Rows) == 0:
		errs.Add("rows", "Add at least one row: an instance type, how many pods, and what each pod asks for.")
	}
	for i, row := range f.Rows {
		if r, ok := validateWhatIfRow(i, row, c, &errs); ok {
			job.Rows = append(job.Rows, r)
		}
	}
	return job, errs
}

// decimalAmount reads a positive decimal number of units at most most, in
// units/scale ("0.1" vCPU is 100 millicores at scale 1000); the smallest
// step is one of those.
func decimalAmount(s string, scale, most int64) (int64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || v <= 0 || v > float64(most) {
		return 0, false
	}
	n := int64(math.Round(v * float64(scale)))
	return n, n > 0
}

// validateWhatIfRow checks one row. A pod runs on one instance, so it may
// ask for at most what one instance has; on a flavor that is no instance
// type, at most the flavor limits above.
func validateWhatIfRow(i int, row WhatIfRow, c WhatIfChoices, errs *Errors) (domain.WhatIfRow, bool) {
	field := func(name string) string { return fmt.Sprintf("row.%d.%s", i, name) }
	r := domain.WhatIfRow{InstanceType: row.InstanceType}
	shape, known := c.Shapes(row.InstanceType)
	flavor := !known && slices.Contains(c.Flavors, row.InstanceType)
	switch {
	case row.InstanceType == "":
		errs.Add(field("instanceType"), "Choose an instance type.")
		return r, false
	case flavor:
		shape = domain.InstanceShape{Type: row.InstanceType, GPUs: maxFlavorGPUs, Neuron: maxFlavorGPUs, VCPU: maxFlavorVCPU, MemoryGiB: maxFlavorMemoryGiB}
	case !known:
		errs.Add(field("instanceType"), fmt.Sprintf("Unknown instance type %q.", truncate(row.InstanceType, 64)))
		return r, false
	}
	ok := true
	if n, valid := wholeNumber(row.Pods, 1, MaxWhatIfPods); valid {
		r.Pods = int32(n)
	} else {
		errs.Add(field("pods"), fmt.Sprintf("Enter a whole number of pods from 1 to %d.", MaxWhatIfPods))
		ok = false
	}
	// perPod reads a pod's request of what one instance has most of; ""
	// is none.
	perPod := func(name, value, unit string, least, most int64) int64 {
		if value == "" {
			return 0
		}
		n, valid := wholeNumber(value, least, most)
		switch {
		case valid:
			return n
		case most == 0:
			errs.Add(field(name), fmt.Sprintf("%s has no %s.", shape.Type, unit))
		case flavor:
			errs.Add(field(name), fmt.Sprintf("Enter a whole number of %s per pod from %d to %d.", unit, least, most))
		default:
			errs.Add(field(name), fmt.Sprintf("Enter a whole number of %s per pod from %d to %d: a pod runs on one instance, and %s has %d.",
				unit, least, most, shape.Type, most))
		}
		ok = false
		return 0
	}
	r.GPUs = perPod("gpus", row.GPUs, "GPUs", 0, shape.GPUs)
	r.Neuron = perPod("neuron", row.Neuron, "Neuron devices", 0, shape.Neuron)
	// vCPU and memory as Kueue's examples ask for them too: a tenth of a
	// vCPU, 200 MiB (0.2 GiB).
	fraction := func(name, value, unit string, scale, most int64) int64 {
		if value == "" {
			return 0
		}
		if n, valid := decimalAmount(value, scale, most); valid {
			return n
		}
		if flavor {
			errs.Add(field(name), fmt.Sprintf("Enter more than 0 and at most %d %s per pod (decimals such as 0.5 too).", most, unit))
		} else {
			errs.Add(field(name), fmt.Sprintf("Enter more than 0 and at most %d %s per pod (decimals such as 0.5 too): a pod runs on one instance, and %s has %d.",
				most, unit, shape.Type, most))
		}
		ok = false
		return 0
	}
	r.CPUMilli = fraction("vcpu", row.VCPU, "vCPUs", 1000, shape.VCPU)
	r.MemoryMiB = fraction("memoryGiB", row.MemoryGiB, "GiB of memory", 1024, shape.MemoryGiB)
	if !ok {
		return r, false
	}
	switch {
	case r.GPUs > 0 && r.Neuron > 0:
		errs.Add(field("gpus"), "Give GPUs or Neuron devices per pod, not both.")
	case r.GPUs == 0 && r.Neuron == 0 && r.CPUMilli == 0:
		errs.Add(field("gpus"), "Give GPUs, Neuron devices or vCPUs per pod.")

	default:
		return r, true
	}
	return r, false
}
