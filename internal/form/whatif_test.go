package form

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/domain"
)

func whatIfChoices() WhatIfChoices {
	return WhatIfChoices{Teams: []string{"cluster-queue", "nlp", "vision"}, Classes: []string{"inference", "training"}, Shapes: domain.LookupShape,
		Flavors: []string{"default-flavor"}}
}

func TestWhatIfForm(t *testing.T) {
	for _, tc := range []struct {
		name  string
		query url.Values
		want  domain.WhatIf
	}{
		{"GPUs, derived vCPU and memory", url.Values{"team": {"nlp"}, "class": {"training"},
			"row.0.instanceType": {"ml.p5.48xlarge"}, "row.0.pods": {"2"}, "row.0.gpus": {"8"}},
			domain.WhatIf{Team: "nlp", Class: "training", Rows: []domain.WhatIfRow{{InstanceType: "ml.p5.48xlarge", Pods: 2, GPUs: 8}}}},
		{"no class, vCPU and memory typed", url.Values{"team": {" vision "},
			"row.0.instanceType": {"ml.g6.12xlarge"}, "row.0.pods": {"1"}, "row.0.gpus": {"1"}, "row.0.vcpu": {"4"}, "row.0.memoryGiB": {"16"}},
			domain.WhatIf{Team: "vision", Rows: []domain.WhatIfRow{{InstanceType: "ml.g6.12xlarge", Pods: 1, GPUs: 1, CPUMilli: 4000, MemoryMiB: 16384}}}},
		{"several rows, blank ones dropped", url.Values{"team": {"nlp"},
			"row.0.instanceType": {"ml.trn1.32xlarge"}, "row.0.pods": {"4"}, "row.0.neuron": {"16"},
			"row.2.instanceType": {"ml.c5.2xlarge"}, "row.2.pods": {"1"}, "row.2.vcpu": {"2"}, "row.2.gpus": {"0"}},
			domain.WhatIf{Team: "nlp", Rows: []domain.WhatIfRow{{InstanceType: "ml.trn1.32xlarge", Pods: 4, Neuron: 16},
				{InstanceType: "ml.c5.2xlarge", Pods: 1, CPUMilli: 2000}}}},
		{"one instance type twice (launcher and workers)", url.Values{"team": {"nlp"},
			"row.0.instanceType": {"ml.p5.48xlarge"}, "row.0.pods": {"1"}, "row.0.gpus": {"1"},
			"row.1.instanceType": {"ml.p5.48xlarge"}, "row.1.pods": {"3"}, "row.1.gpus": {"8"}},
			domain.WhatIf{Team: "nlp", Rows: []domain.WhatIfRow{{InstanceType: "ml.p5.48xlarge", Pods: 1, GPUs: 1},
				{InstanceType: "ml.p5.48xlarge", Pods: 3, GPUs: 8}}}},
		{"a flavor that is no instance type (a queue of Kueue's examples): vCPU alone", url.Values{"team": {"cluster-queue"},
			"row.0.instanceType": {"default-flavor"}, "row.0.pods": {"3"}, "row.0.vcpu": {"1"}},
			domain.WhatIf{Team: "cluster-queue", Rows: []domain.WhatIfRow{{InstanceType: "default-flavor", Pods: 3, CPUMilli: 1000}}}},
		{"a tenth of a vCPU and 200 MiB, as Kueue's sample job asks", url.Values{"team": {"cluster-queue"},
			"row.0.instanceType": {"default-flavor"}, "row.0.pods": {"3"}, "row.0.vcpu": {"0.1"}, "row.0.memoryGiB": {"0.2"}},
			domain.WhatIf{Team: "cluster-queue", Rows: []domain.WhatIfRow{{InstanceType: "default-flavor", Pods: 3, CPUMilli: 100, MemoryMiB: 205}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := ParseWhatIf(tc.query).Validate(whatIfChoices())
			if errs.Any() {
				t.Fatalf("errors on %v", errs.Fields())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("what-if (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWhatIfFormErrors(t *testing.T) {
	valid := func() url.Values {
		return url.Values{"team": {"nlp"}, "class": {"training"}, "row.0.instanceType": {"ml.p5.48xlarge"}, "row.0.pods": {"2"}, "row.0.gpus": {"8"}}
	}
	for _, tc := range []struct {
		name    string
		change  func(url.Values)
		choices func(*WhatIfChoices)
		want    map[string]string
	}{
		{"no team", func(v url.Values) { v.Del("team") }, nil, map[string]string{"team": "Choose a team."}},
		{"a team the member cannot see", func(v url.Values) { v.Set("team", "speech") }, nil,
			map[string]string{"team": `You cannot see team "speech".`}},
		{"a team that does not exist, asked by a platform viewer", func(v url.Values) { v.Set("team", "speech") },
			func(c *WhatIfChoices) { c.SeesAll = true }, map[string]string{"team": `There is no team "speech".`}},
		{"a class the policy does not have", func(v url.Values) { v.Set("class", "urgent") }, nil,
			map[string]string{"class": "Choose one of the cluster's priority classes, or none."}},
		{"a class when the policy has none", func(v url.Values) { v.Set("class", "urgent") }, func(c *WhatIfChoices) { c.Classes = nil },
			map[string]string{"class": "The cluster has no priority classes: leave the class empty."}},
		{"no rows", func(v url.Values) {
			for _, k := range []string{"row.0.instanceType", "row.0.pods", "row.0.gpus"} {
				v.Del(k)
			}
		}, nil, map[string]string{"rows": "Add at least one row: an instance type, how many pods, and what each pod asks for."}},
		{"no instance type", func(v url.Values) { v.Del("row.0.instanceType") }, nil,
			map[string]string{"row.0.instanceType": "Choose an instance type."}},
		{"unknown instance type", func(v url.Values) { v.Set("row.0.instanceType", "ml.zz.huge") }, nil,
			map[string]string{"row.0.instanceType": `Unknown instance type "ml.zz.huge".`}},
		{"more than a flavor that is no instance type lets a pod ask for", func(v url.Values) {
			v.Set("row.0.instanceType", "default-flavor")
			v.Set("row.0.gpus", "65")
			v.Set("row.0.vcpu", "2000")
		}, nil, map[string]string{"row.0.gpus": "Enter a whole number of GPUs per pod from 0 to 64.",
			"row.0.vcpu": "Enter more than 0 and at most 1024 vCPUs per pod (decimals such as 0.5 too)."}},
		{"no pods", func(v url.Values) { v.Del("row.0.pods") }, nil,
			map[string]string{"row.0.pods": "Enter a whole number of pods from 1 to 1000."}},
		{"1001 pods", func(v url.Values) { v.Set("row.0.pods", "1001") }, nil,
			map[string]string{"row.0.pods": "Enter a whole number of pods from 1 to 1000."}},
		{"more GPUs than an instance has", func(v url.Values) { v.Set("row.0.gpus", "9") }, nil,
			map[string]string{"row.0.gpus": "Enter a whole number of GPUs per pod from 0 to 8: a pod runs on one instance, and ml.p5.48xlarge has 8."}},
		{"fractional GPUs", func(v url.Values) { v.Set("row.0.gpus", "1.5") }, nil,
			map[string]string{"row.0.gpus": "Enter a whole number of GPUs per pod from 0 to 8: a pod runs on one instance, and ml.p5.48xlarge has 8."}},
		{"GPUs on a CPU instance", func(v url.Values) { v.Set("row.0.instanceType", "ml.c5.2xlarge") }, nil,
			map[string]string{"row.0.gpus": "ml.c5.2xlarge has no GPUs."}},
		{"Neuron on a GPU instance", func(v url.Values) { v.Del("row.0.gpus"); v.Set("row.0.neuron", "1") }, nil,
			map[string]string{"row.0.neuron": "ml.p5.48xlarge has no Neuron devices."}},
		{"0 GPUs and Neuron devices", func(v url.Values) {
			v.Set("row.0.instanceType", "ml.trn1.32xlarge")
			v.Set("row.0.gpus", "0")
			v.Set("row.0.neuron", "2")
		}, nil, map[string]string{}},
		{"GPUs and Neuron devices", func(v url.Values) { v.Set("row.0.instanceType", "both"); v.Set("row.0.neuron", "2") },
			func(c *WhatIfChoices) {
				c.Shapes = func(string) (domain.InstanceShape, bool) {
					return domain.InstanceShape{Type: "both", GPUs: 8, Neuron: 8, VCPU: 96, MemoryGiB: 1024}, true
				}
			}, map[string]string{"row.0.gpus": "Give GPUs or Neuron devices per pod, not both."}},
		{"nothing asked per pod", func(v url.Values) { v.Del("row.0.gpus"); v.Set("row.0.memoryGiB", "10") }, nil,
			map[string]string{"row.0.gpus": "Give GPUs, Neuron devices or vCPUs per pod."}},
		{"zero vCPUs", func(v url.Values) { v.Set("row.0.vcpu", "0") }, nil,
			map[string]string{"row.0.vcpu": "Enter more than 0 and at most 192 vCPUs per pod (decimals such as 0.5 too): a pod runs on one instance, and ml.p5.48xlarge has 192."}},
		{"more memory than an instance has", func(v url.Values) { v.Set("row.0.memoryGiB", "4096") }, nil,
			map[string]string{"row.0.memoryGiB": "Enter more than 0 and at most 2048 GiB of memory per pod (decimals such as 0.5 too): a pod runs on one instance, and ml.p5.48xlarge has 2048."}},
		{"errors of a later row and the team together", func(v url.Values) {
			v.Set("team", "")
			v.Set("row.3.instanceType", "ml.g5.2xlarge")
			v.Set("row.3.pods", "0")
			v.Set("row.3.gpus", "2")
		}, nil, map[string]string{"team": "Choose a team.", "row.1.pods": "Enter a whole number of pods from 1 to 1000.",
			"row.1.gpus": "Enter a whole number of GPUs per pod from 0 to 1: a pod runs on one instance, and ml.g5.2xlarge has 1."}},
		{"sixteen rows", func(v url.Values) {
			for i := range 16 {
				p := "row." + strconv.Itoa(i) + "."
				v.Set(p+"instanceType", "ml.p5.48xlarge")
				v.Set(p+"pods", "1")
				v.Set(p+"gpus", "1")
			}
		}, nil, map[string]string{"rows": "Use at most 15 rows."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := valid()
			tc.change(v)
			c := whatIfChoices()
			if tc.choices != nil {
				tc.choices(&c)
			}
			_, errs := ParseWhatIf(v).Validate(c)
			got := map[string]string{}
			for _, f := range errs.Fields() {
				got[f] = errs.Get(f)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// What was typed stays as typed, for the form shown again with its errors.
func TestWhatIfFormKeepsWhatWasTyped(t *testing.T) {
	v := url.Values{"team": {"nlp"}, "class": {"Urgent!"}, "row.0.instanceType": {"ml.zz.huge"}, "row.0.pods": {"two"},
		"row.0.gpus": {"-1"}, "row.0.vcpu": {"1.5"}, "row.0.memoryGiB": {"lots"}, "row.1.neuron": {" 3 "}}
	want := WhatIfForm{Team: "nlp", Class: "Urgent!", Rows: []WhatIfRow{
		{InstanceType: "ml.zz.huge", Pods: "two", GPUs: "-1", VCPU: "1.5", MemoryGiB: "lots"}, {Neuron: "3"}}}
	if diff := cmp.Diff(want, ParseWhatIf(v)); diff != "" {
		t.Errorf("form as typed (-want +got):\n%s", diff)
	}
}
