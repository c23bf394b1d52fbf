package form

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/domain"
)

func TestPolicyForm(t *testing.T) {
	valid := func() url.Values {
		return url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"},
			"class.0.name": {"inference"}, "class.0.weight": {"90"}, "class.1.name": {"batch"}, "class.1.weight": {"10"}}
	}
	got, errs := ParsePolicy(valid()).Validate()
	if errs.Any() {
		t.Fatalf("errors on %v", errs.Fields())
	}
	want := domain.Policy{Prioritization: domain.TaskRanking, IdleAllocation: domain.IdleFairShare,
		Classes: []domain.PriorityClass{{Name: "inference", Weight: 90}, {Name: "batch", Weight: 10}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}

	// The insights' thresholds: blank keeps the defaults; typed, they are
	// kept, and a class may have its own long wait.
	v := valid()
	v.Set("alerts.longWait", "90")
	v.Set("alerts.idleUtilization", "15")
	v.Set("alerts.borrowing", "180")
	v.Set("class.0.longWait", "10")
	got, errs = ParsePolicy(v).Validate()
	if errs.Any() {
		t.Fatalf("errors on %v", errs.Fields())
	}
	want.Alerts = domain.PolicyAlerts{LongWaitMinutes: 90, IdleUtilizationPercent: 15, BorrowingMinutes: 180}
	want.Classes[0].LongWaitMinutes = 10
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("policy with alerts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ParsePolicy(v), FromPolicy(got)); diff != "" {
		t.Errorf("the form of the stored policy (-typed +shown):\n%s", diff)
	}

	cases := []struct {
		name   string
		change func(url.Values)
		field  string
		says   string
	}{
		{"weight above 100", func(v url.Values) { v.Set("class.0.weight", "101") }, "class.0.weight", "0 to 100"},
		{"negative weight", func(v url.Values) { v.Set("class.1.weight", "-1") }, "class.1.weight", "0 to 100"},
		{"bad class name", func(v url.Values) { v.Set("class.0.name", "Inference!") }, "class.0.name", "lowercase"},
		{"duplicate class", func(v url.Values) { v.Set("class.1.name", "inference") }, "class.1.name", "already listed"},
		{"weight without name", func(v url.Values) { v.Set("class.2.weight", "5") }, "class.2.name", "Enter a class name"},
		{"ranking without classes", func(v url.Values) {
			v.Del("class.0.name")
			v.Del("class.0.weight")
			v.Del("class.1.name")
			v.Del("class.1.weight")
		}, "classes", "at least one"},
		{"eleven classes", func(v url.Values) {
			for i := 2; i < 11; i++ {
				v.Set("class."+strconv.Itoa(i)+".name", "c"+strconv.Itoa(i))
				v.Set("class."+strconv.Itoa(i)+".weight", "1")
			}
		}, "classes", "at most 10"},
		{"unknown prioritization", func(v url.Values) { v.Set("prioritization", "Random") }, "prioritization", "Choose"},
		{"unknown idle allocation", func(v url.Values) { v.Del("idleAllocation") }, "idleAllocation", "Choose"},
		{"long wait not a number", func(v url.Values) { v.Set("alerts.longWait", "an hour") }, "alerts.longWait", "whole minutes"},
		{"long wait over a week", func(v url.Values) { v.Set("alerts.longWait", "10081") }, "alerts.longWait", "a week"},
		{"idle alert at 0 %", func(v url.Values) { v.Set("alerts.idleUtilization", "0") }, "alerts.idleUtilization", "1 to 100"},
		{"negative borrowing alert", func(v url.Values) { v.Set("alerts.borrowing", "-5") }, "alerts.borrowing", "whole minutes"},
		{"class long wait of 0", func(v url.Values) { v.Set("class.1.longWait", "0") }, "class.1.longWait", "the policy's"},
		{"long wait without a class", func(v url.Values) { v.Set("class.2.longWait", "30") }, "class.2.name", "Enter a class name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := valid()
			tc.change(v)
			_, errs := ParsePolicy(v).Validate()
			if got := errs.Get(tc.field); !strings.Contains(got, tc.says) {
				t.Errorf("error on %s = %q, want %q (errors on %v)", tc.field, got, tc.says, errs.Fields())
			}
		})
	}
}
