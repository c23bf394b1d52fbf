package form

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/openquota/console/internal/domain"
)

func validForm() url.Values {
	return url.Values{
		"name": {"onlygputeam"}, "description": {"LLM team"}, "enabled": {"true"},
		"users": {"alice\nbob\n\nalice"}, "groups": {"ml-leads"},
		"fairShareWeight": {"10"}, "preemption": {"LowerPriority"}, "lending": {"LendAndBorrow"}, "borrowLimit": {"50"},
		"quota.0.instanceType": {"ml.g6.12xlarge"}, "quota.0.gpus": {"2"}, "quota.0.vcpu": {"48"},
	}
}

func TestValidTeamForm(t *testing.T) {
	got, errs := ParseTeam(validForm()).Validate(domain.LookupShape)
	if errs.Any() {
		t.Fatalf("unexpected errors on %v", errs.Fields())
	}
	want := domain.Team{
		Name: "onlygputeam", Description: "LLM team", Enabled: true,
		Members:         []domain.Member{{Kind: "User", Name: "alice"}, {Kind: "User", Name: "bob"}, {Kind: "Group", Name: "ml-leads"}},
		FairShareWeight: 10, Preemption: domain.PreemptLowerPriority, Lending: domain.LendAndBorrow, BorrowLimitPercent: 50,
		Quota: []domain.QuotaInput{{InstanceType: "ml.g6.12xlarge", GPUs: ptr.To[int64](2), VCPU: ptr.To[int64](48)}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("team (-want +got):\n%s", diff)
	}
	// The edit form shows back exactly what was typed (minus duplicates and blanks).
	back := FromTeam(got)
	if back.Quota[0] != (QuotaRow{InstanceType: "ml.g6.12xlarge", GPUs: "2", VCPU: "48"}) || back.Users != "alice\nbob" {
		t.Errorf("FromTeam round trip: %+v", back)
	}
}

func TestTeamFormErrors(t *testing.T) {
	cases := []struct {
		name   string
		change func(v url.Values)
		field  string
		says   string
	}{
		{"empty name", func(v url.Values) { v.Set("name", "") }, "name", "Enter a team name"},
		{"uppercase name", func(v url.Values) { v.Set("name", "ML") }, "name", "lowercase"},
		{"name ends with dash", func(v url.Values) { v.Set("name", "ml-") }, "name", "lowercase"},
		{"name too long", func(v url.Values) { v.Set("name", strings.Repeat("a", 41)) }, "name", "at most 40"},
		{"script in name", func(v url.Values) { v.Set("name", "<script>") }, "name", "lowercase"},
		{"description too long", func(v url.Values) { v.Set("description", strings.Repeat("é", 1025)) }, "description", "at most 1024"},
		{"weight above 100", func(v url.Values) { v.Set("fairShareWeight", "101") }, "fairShareWeight", "0 to 100"},
		{"weight not a number", func(v url.Values) { v.Set("fairShareWeight", "ten") }, "fairShareWeight", "0 to 100"},
		{"borrow limit 0", func(v url.Values) { v.Set("borrowLimit", "0") }, "borrowLimit", "1 to 500"},
		{"borrow limit 501", func(v url.Values) { v.Set("borrowLimit", "501") }, "borrowLimit", "1 to 500"},
		{"unknown lending", func(v url.Values) { v.Set("lending", "Share") }, "lending", "Choose"},
		{"unknown preemption", func(v url.Values) { v.Set("preemption", "Always") }, "preemption", "Choose"},
		{"unknown order", func(v url.Values) { v.Set("order", "random") }, "order", "recent use"},
		{"activation missing", func(v url.Values) { v.Del("enabled") }, "enabled", "Enabled or Disabled"},
		{"negative GPUs", func(v url.Values) { v.Set("quota.0.gpus", "-2") }, "quota.0.gpus", "whole number"},
		{"fractional GPUs", func(v url.Values) { v.Set("quota.0.gpus", "1.5") }, "quota.0.gpus", "whole number"},
		{"GPUs on a CPU type", func(v url.Values) { v.Set("quota.0.instanceType", "ml.c5.2xlarge") }, "quota.0.gpus", "has no GPUs"},
		{"Neuron on a GPU type", func(v url.Values) { v.Del("quota.0.gpus"); v.Set("quota.0.neuron", "2") }, "quota.0.neuron", "no Neuron"},
		{"count and GPUs", func(v url.Values) { v.Set("quota.0.count", "1") }, "quota.0.count", "not both"},
		{"nothing given", func(v url.Values) { v.Del("quota.0.gpus"); v.Del("quota.0.vcpu") }, "quota.0.count", "Give an instance count"},
		{"memory alone", func(v url.Values) { v.Del("quota.0.gpus"); v.Del("quota.0.vcpu"); v.Set("quota.0.memoryGiB", "10") }, "quota.0.count", "Memory alone"},
		{"unknown type", func(v url.Values) { v.Set("quota.0.instanceType", "ml.zz.huge") }, "quota.0.instanceType", "Unknown instance type"},
		{"duplicate type", func(v url.Values) { v.Set("quota.1.instanceType", "ml.g6.12xlarge"); v.Set("quota.1.gpus", "1") }, "quota.1.instanceType", "already has a row"},
		{"control character in member", func(v url.Values) { v.Set("users", "al\x00ice") }, "users", "not a valid user"},
		{"invalid UTF-8 in member", func(v url.Values) { v.Set("users", "al\xffice") }, "users", "not a valid user"},
		// Kubernetes' own groups and users: everyone, every ServiceAccount, a component.
		{"system group as member", func(v url.Values) { v.Set("groups", "ml\nsystem:unauthenticated") }, "groups", "system:unauthenticated"},
		{"every ServiceAccount as member", func(v url.Values) { v.Set("groups", "system:serviceaccounts") }, "groups", "Kubernetes' own"},
		{"a ServiceAccount as member", func(v url.Values) { v.Set("users", "system:serviceaccount:kube-system:default") }, "users", "Kubernetes' own"},
		{"direction override in member", func(v url.Values) { v.Set("users", "alice\u202e@example.com") }, "users", "not a valid user"},
		{"zero-width character in member", func(v url.Values) { v.Set("groups", "m\u200bl") }, "groups", "not a valid group"},
		{"direction override in description", func(v url.Values) { v.Set("description", "gpu team \u202eLIAF\u202c end") }, "description", "reverse the direction"},
		{"invalid UTF-8 in description", func(v url.Values) { v.Set("description", "ok \xff\xfe bad") }, "description", "not valid UTF-8"},
		{"no quota rows", func(v url.Values) { v.Del("quota.0.instanceType"); v.Del("quota.0.gpus"); v.Del("quota.0.vcpu") }, "quota", "at least one instance type"},
		{"lend limit above the quota", func(v url.Values) { v.Set("quota.0.lendGPUs", "3") }, "quota.0.lendGPUs", "Lend at most the team's quota of ml.g6.12xlarge: 2 GPUs."},
		{"lend limit above the vCPU quota", func(v url.Values) { v.Set("quota.0.lendVCPU", "49") }, "quota.0.lendVCPU", "at most the team's quota of ml.g6.12xlarge: 48 vCPU"},
		{"lend limit on Neuron of a GPU type", func(v url.Values) { v.Set("quota.0.lendNeuron", "1") }, "quota.0.lendNeuron", "no Neuron devices of ml.g6.12xlarge to lend"},
		{"negative lend limit", func(v url.Values) { v.Set("quota.0.lendMemoryGiB", "-1") }, "quota.0.lendMemoryGiB", "whole number"},
		{"lend limit on a team that doesn't lend", func(v url.Values) { v.Set("lending", "DontLend"); v.Set("quota.0.lendGPUs", "1") },
			"quota.0.lendGPUs", "doesn't lend"},
		{"absurd instance count", func(v url.Values) { v.Del("quota.0.gpus"); v.Set("quota.0.count", "10001") }, "quota.0.count", "0 to 10000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := validForm()
			tc.change(v)
			_, errs := ParseTeam(v).Validate(domain.LookupShape)
			if got := errs.Get(tc.field); !strings.Contains(got, tc.says) {
				t.Errorf("error on %s = %q, want it to say %q (errors on %v)", tc.field, got, tc.says, errs.Fields())
			}
		})
	}
}

// Lend limits up to the quota are taken, with either lending choice that lends.
func TestTeamFormLendLimits(t *testing.T) {
	for _, lending := range []string{"LendAndBorrow", "Lend"} {
		v := validForm()
		v.Set("lending", lending)
		v.Set("quota.0.lendGPUs", "2")
		v.Set("quota.0.lendVCPU", "0")
		got, errs := ParseTeam(v).Validate(domain.LookupShape)
		if errs.Any() {
			t.Fatalf("%s: errors on %v", lending, errs.Fields())
		}
		want := domain.QuotaInput{InstanceType: "ml.g6.12xlarge", GPUs: ptr.To[int64](2), VCPU: ptr.To[int64](48),
			LendGPUs: ptr.To[int64](2), LendVCPU: ptr.To[int64](0)}
		if diff := cmp.Diff([]domain.QuotaInput{want}, got.Quota); diff != "" {
			t.Errorf("%s: quota (-want +got):\n%s", lending, diff)
		}
	}
}

func TestTooManyQuotaRows(t *testing.T) {
	v := validForm()
	for i, typ := range domain.CatalogTypes()[:16] {
		v.Set("quota."+strconv.Itoa(i)+".instanceType", typ)
		v.Set("quota."+strconv.Itoa(i)+".vcpu", "1")
	}
	_, errs := ParseTeam(v).Validate(domain.LookupShape)
	if !strings.Contains(errs.Get("quota"), "at most 15") {
		t.Errorf("quota error = %q", errs.Get("quota"))
	}
}
