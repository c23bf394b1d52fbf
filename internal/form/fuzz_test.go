package form

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/openquota/console/internal/domain"
)

// Every field error of the team form names one of its fields.
var teamFieldRE = regexp.MustCompile(`^(?:name|description|enabled|users|groups|fairShareWeight|preemption|lending|borrowLimit|quota|quota\.(\d+)\.(?:instanceType|count|gpus|neuron|vcpu|memoryGiB))$`)

// Every field error of the policy form names one of its fields.
var policyFieldRE = regexp.MustCompile(`^(?:prioritization|idleAllocation|classes|class\.(\d+)\.(?:name|weight))$`)

// fuzzType picks an instance type: mostly catalog types (so rows get past
// the type check and the numbers are exercised), else the raw fuzzed
// string, else nothing.
func fuzzType(i uint8, raw string) string {
	types := domain.CatalogTypes()
	switch k := int(i) % (len(types) + 2); {
	case k < len(types):
		return types[k]
	case k == len(types):
		return raw
	default:
		return ""
	}
}

// checkFieldErrors checks that errors name fields the form has; rows is how
// many rows the form shows (the indices errors may use).
func checkFieldErrors(t *testing.T, errs Errors, re *regexp.Regexp, rows int) {
	t.Helper()
	seen := map[string]bool{}
	for _, field := range errs.Fields() {
		m := re.FindStringSubmatch(field)
		if m == nil {
			t.Errorf("error on %q, which is not a field of the form", field)
			continue
		}
		if m[1] != "" {
			if n, err := strconv.Atoi(m[1]); err != nil || n >= rows {
				t.Errorf("error on %q, but the form shows %d rows", field, rows)
			}
		}
		if seen[field] {
			t.Errorf("two errors on %q", field)
		}
		seen[field] = true
		msg := errs.Get(field)
		if strings.TrimSpace(msg) == "" || !utf8.ValidString(msg) {
			t.Errorf("error on %q has message %q", field, msg)
		}
	}
}

// teamValues is what the browser posts for a form.
func teamValues(f TeamForm) url.Values {
	v := url.Values{"name": {f.Name}, "description": {f.Description}, "enabled": {f.Enabled}, "users": {f.Users},
		"groups": {f.Groups}, "fairShareWeight": {f.FairShareWeight}, "preemption": {f.Preemption},
		"lending": {f.Lending}, "borrowLimit": {f.BorrowLimit}, "order": {f.Order}}
	for i, r := range f.Quota {
		p := fmt.Sprintf("quota.%d.", i)
		v.Set(p+"instanceType", r.InstanceType)
		v.Set(p+"count", r.Count)
		v.Set(p+"gpus", r.GPUs)
		v.Set(p+"neuron", r.Neuron)
		v.Set(p+"vcpu", r.VCPU)
		v.Set(p+"memoryGiB", r.MemoryGiB)
	}
	return v
}

// wholeDevice are the resources counted in whole devices.
var wholeDevice = map[corev1.ResourceName]bool{domain.ResourceGPU: true, domain.ResourceNeuron: true, domain.ResourceEFA: true}

func checkQuantity(t *testing.T, what string, r corev1.ResourceName, q *resource.Quantity) {
	t.Helper()
	if q == nil {
		return
	}
	if q.Sign() < 0 {
		t.Errorf("%s of %s is negative: %s", what, r, q)
	}
	if wholeDevice[r] || r == corev1.ResourceMemory {
		if _, ok := q.AsInt64(); !ok { // an integer that fits int64
			t.Errorf("%s of %s is not whole: %s", what, r, q)
		}
	}
}

// FuzzTeamForm posts arbitrary strings in every field of the team form,
// quota rows and members included.
func FuzzTeamForm(f *testing.F) {
	type seed struct {
		name, description, enabled, users, groups, weight, preemption, lending, borrow string
		type0                                                                          uint8
		rawType0, count0, gpus0, neuron0, vcpu0, mem0                                  string
		slot1, type1                                                                   uint8
		gpus1, vcpu1, mem1                                                             string
		extraRows                                                                      uint8
	}
	types := domain.CatalogTypes()
	idx := func(name string) uint8 {
		for i, t := range types {
			if t == name {
				return uint8(i)
			}
		}
		panic(name)
	}
	none := uint8(len(types) + 1) // no instance type
	raw := uint8(len(types))      // the raw string
	seeds := []seed{
		// Good forms.
		{"onlygputeam", "LLM team", "true", "alice\nbob\n\nalice", "ml-leads", "10", "LowerPriority", "LendAndBorrow", "50",
			idx("ml.g6.12xlarge"), "", "", "2", "", "48", "", 0, none, "", "", "", 0},
		{"research", "", "false", "", "", "0", "Never", "DontLend", "", idx("ml.p5.48xlarge"), "", "2", "", "", "", "",
			1, idx("ml.trn1.32xlarge"), "", "", "", 0},
		{"a", "x", "true", "", "g", "100", "Never", "Lend", "abc", idx("ml.trn1.32xlarge"), "", "", "", "16", "", "",
			1, idx("ml.c5.2xlarge"), "", "8", "20", 0},
		{"cpu-1", "", "true", "u", "", "5", "LowerPriority", "LendAndBorrow", "500", idx("ml.c5.2xlarge"), "", "", "", "", "4", "",
			2, idx("ml.g5.2xlarge"), "1", "", "", 0},
		{"full", "é", "true", "", "", "1", "Never", "LendAndBorrow", "1", idx("ml.g5.2xlarge"), "", "", "0", "", "", "0",
			0, none, "", "", "", 12},
		// Nasty forms.
		// The largest accepted count at 500 % once overflowed the memory borrowing limit.
		{"ovf", "", "true", "", "", "0", "Never", "LendAndBorrow", "500", idx("ml.p5.48xlarge"), "", "10000", "", "", "", "",
			0, none, "", "", "", 0},
		{"ovf-gpus", "", "true", "", "", "0", "Never", "LendAndBorrow", "500", idx("ml.p5.48xlarge"), "", "", "100000", "", "", "",
			0, none, "", "", "", 0},
		{"<script>alert(1)</script>", "<script>alert(1)</script>", "true", "\"><img src=x onerror=alert(1)>\njavascript:alert(1)", "=cmd|' /C calc'!A0",
			"1e3", "LowerPriority", "LendAndBorrow", "+50", raw, "<b>", "1", "", "", "", "", 0, none, "", "", "", 0},
		{strings.Repeat("a", 41), strings.Repeat("é", 1025), "TRUE", strings.Repeat("u\n", 150), "al\x00ice\r\nbob", "-1",
			"always", "Share", "0", raw, "ml.zz.huge", "", "", "", "", "", 0, none, "", "", "", 0},
		{"ml-", "\xff\xfe", "", "\xc3\x28", "\u2028\u00a0", "9223372036854775808", "", "", "501", idx("ml.c5.2xlarge"), "", "",
			"4", "", "", "", 0, idx("ml.c5.2xlarge"), "1", "", "", 0},
		{"x", "", "false", "", "", " 7 ", "Never", "Lend", "", idx("ml.p5.48xlarge"), "", "1", "2", "", "", "",
			0, idx("ml.p5.48xlarge"), "", "", "", 0},
		{"y", "", "true", "", "", "0", "Never", "DontLend", "", idx("ml.g5.2xlarge"), "", "", "1", "1", "", "",
			3, idx("ml.g5.2xlarge"), "", "", "10", 30},
		{"z", "", "true", "", "", "0", "Never", "DontLend", "", idx("ml.p5.48xlarge"), "", "", "", "", "", "10",
			40, idx("ml.trn1.32xlarge"), "1.5", "-2", "0x10", 0},
		{"big", "", "true", "", "", "0", "Never", "DontLend", "", idx("ml.p5.48xlarge"), "", "1000000", "", "", "", "",
			1, idx("ml.c5.2xlarge"), "", "1000000", "1000000", 0},
		{"bigger", "", "true", "", "", "0", "Never", "Lend", "", idx("ml.p5.48xlarge"), "", "1000001", "", "", "", "",
			29, idx("ml.g5.2xlarge"), "", "", "", 0},
		{"huge", "", "true", "", "", "100", "LowerPriority", "LendAndBorrow", "50", idx("ml.p5.48xlarge"), "", "", "100000", "", "", "",
			1, none, "", "", "", 0},
		{"", "", "", "", "", "", "", "", "", none, "", "", "", "", "", "", 0, none, "", "", "", 0},
	}
	for _, s := range seeds {
		f.Add(s.name, s.description, s.enabled, s.users, s.groups, s.weight, s.preemption, s.lending, s.borrow,
			s.type0, s.rawType0, s.count0, s.gpus0, s.neuron0, s.vcpu0, s.mem0, s.slot1, s.type1, s.gpus1, s.vcpu1, s.mem1, s.extraRows)
	}

	f.Fuzz(func(t *testing.T, name, description, enabled, users, groups, weight, preemption, lending, borrow string,
		type0 uint8, rawType0, count0, gpus0, neuron0, vcpu0, mem0 string,
		slot1, type1 uint8, gpus1, vcpu1, mem1 string, extraRows uint8) {
		v := url.Values{"name": {name}, "description": {description}, "enabled": {enabled}, "users": {users},
			"groups": {groups}, "fairShareWeight": {weight}, "preemption": {preemption}, "lending": {lending}, "borrowLimit": {borrow}}
		add := func(row int, field, value string) {
			if value != "" {
				v.Add(fmt.Sprintf("quota.%d.%s", row, field), value) // Add: a repeated row repeats keys
			}
		}
		add(0, "instanceType", fuzzType(type0, rawType0))
		add(0, "count", count0)
		add(0, "gpus", gpus0)
		add(0, "neuron", neuron0)
		add(0, "vcpu", vcpu0)
		add(0, "memoryGiB", mem0)
		// A second row anywhere, past the rows the form reads too.
		row1 := int(slot1) % 40
		add(row1, "instanceType", fuzzType(type1, ""))
		add(row1, "gpus", gpus1)
		add(row1, "vcpu", vcpu1)
		add(row1, "memoryGiB", mem1)
		// Extra plausible rows, up to more than the form allows.
		for i := 0; i < int(extraRows)%35; i++ {
			add(2+i, "instanceType", domain.CatalogTypes()[i%len(domain.CatalogTypes())])
			add(2+i, "vcpu", strconv.Itoa(i+1))
		}

		form := ParseTeam(v)
		team, errs := form.Validate(domain.LookupShape)
		if errs.Any() {
			checkFieldErrors(t, errs, teamFieldRE, len(form.Quota))
			return
		}

		// Valid: what the console would write.
		if !dnsLabel.MatchString(team.Name) || len(team.Name) > MaxTeamName {
			t.Fatalf("accepted team name %q", team.Name)
		}
		if len(team.Quota) != len(form.Quota) || len(team.Quota) > MaxQuotaRows || len(team.Members) > MaxMembers {
			t.Fatalf("accepted %d quota rows (form %d) and %d members", len(team.Quota), len(form.Quota), len(team.Members))
		}
		if team.FairShareWeight < 0 || team.FairShareWeight > 100 || team.BorrowLimitPercent < 0 || team.BorrowLimitPercent > MaxBorrowPct ||
			(team.Lending == domain.LendAndBorrow && team.BorrowLimitPercent < 1) {
			t.Fatalf("accepted weight %d, borrow limit %d %%", team.FairShareWeight, team.BorrowLimitPercent)
		}
		for _, m := range team.Members {
			if m.Name == "" || len(m.Name) > maxMemberName || (m.Kind != "User" && m.Kind != "Group") {
				t.Fatalf("accepted member %+v", m)
			}
		}
		for _, q := range team.Quota {
			shape, _ := domain.LookupShape(q.InstanceType)
			d := domain.DeriveQuota(q, shape)
			if d.GPUs < 0 || d.Neuron < 0 || d.EFA < 0 || d.CPUMilli < 0 || d.MemoryMiB < 0 {
				t.Fatalf("negative derived quota %+v for row %+v", d, q)
			}
		}
		objs, err := domain.BuildTeam(domain.DefaultSettings, team, domain.LookupShape)
		if err != nil {
			t.Fatalf("BuildTeam refused a validated team: %v", err)
		}
		for _, rg := range objs.ClusterQueue.Spec.ResourceGroups {
			for _, fl := range rg.Flavors {
				for _, r := range fl.Resources {
					checkQuantity(t, "nominal quota", *r.Name, r.NominalQuota)
					checkQuantity(t, "borrowing limit", *r.Name, r.BorrowingLimit)
					checkQuantity(t, "lending limit", *r.Name, r.LendingLimit)
				}
			}
		}
		if fs := objs.ClusterQueue.Spec.FairSharing; fs != nil && fs.Weight != nil {
			checkQuantity(t, "fair-share weight", "weight", fs.Weight)
		}

		// The edit form shows the stored team back; saving it unchanged
		// stores the same team.
		again, errs := ParseTeam(teamValues(FromTeam(team))).Validate(domain.LookupShape)
		if errs.Any() {
			t.Fatalf("the edit form of a valid team has errors on %v", errs.Fields())
		}
		if diff := cmp.Diff(team, again); diff != "" {
			t.Fatalf("edit form round trip (-saved +resaved):\n%s", diff)
		}
		// The allocation annotation reads back as the team but its members
		// (the revision keeps those). JSON turns invalid UTF-8 into U+FFFD,
		// so only valid text can round-trip.
		if utf8.ValidString(team.Description) && utf8.ValidString(users) && utf8.ValidString(groups) {
			var stored domain.Team
			if err := json.Unmarshal([]byte(objs.ClusterQueue.Annotations[domain.AllocationAnnotation]), &stored); err != nil {
				t.Fatalf("allocation annotation: %v", err)
			}
			onQueue := team
			onQueue.Members = nil
			if diff := cmp.Diff(onQueue, stored); diff != "" {
				t.Fatalf("allocation annotation round trip (-team +stored):\n%s", diff)
			}
			if diff := cmp.Diff(team, *objs.Allocation); diff != "" {
				t.Fatalf("the revision's allocation (-team +recorded):\n%s", diff)
			}
		}
	})
}

// FuzzPolicyForm posts arbitrary strings in every field of the policy form.
func FuzzPolicyForm(f *testing.F) {
	f.Add("TaskRanking", "FairShare", "inference", "90", "batch", "10", uint8(1), uint8(0))
	f.Add("FirstComeFirstServe", "FirstComeFirstServe", "", "", "", "", uint8(1), uint8(0))
	f.Add("FirstComeFirstServe", "FairShare", "high", "100", "low", "0", uint8(5), uint8(3))
	f.Add("TaskRanking", "FirstComeFirstServe", "a", "0", "b-2", "100", uint8(19), uint8(8))
	// Nasty.
	f.Add("TaskRanking", "FairShare", "<script>alert(1)</script>", "50", "\"><img src=x onerror=alert(1)>", "50", uint8(1), uint8(0))
	f.Add("TaskRanking", "FairShare", "Inference!", "101", "inference", "-1", uint8(1), uint8(0))
	f.Add("TaskRanking", "FairShare", "dup", "1", "dup", "2", uint8(1), uint8(0))
	f.Add("TaskRanking", "FairShare", "", "5", "x", "", uint8(1), uint8(0))
	f.Add("TaskRanking", "FairShare", "", "", "", "", uint8(1), uint8(0))
	f.Add("taskranking", "fairshare", "a", "1", "b", "1", uint8(1), uint8(12))
	f.Add("TaskRanking", "FairShare", "a", "1", "b", "1", uint8(0), uint8(25))
	f.Add("TaskRanking", "FairShare", strings.Repeat("a", 41), "2147483648", "\xff", " 1 ", uint8(30), uint8(0))
	f.Add("FirstComeFirstServe", "FairShare", "javascript:alert(1)", "=1+1", "@sum", "+5", uint8(21), uint8(0))

	f.Fuzz(func(t *testing.T, prioritization, idle, name0, weight0, name1, weight1 string, slot1, extra uint8) {
		v := url.Values{"prioritization": {prioritization}, "idleAllocation": {idle}}
		add := func(row int, field, value string) {
			if value != "" {
				v.Add(fmt.Sprintf("class.%d.%s", row, field), value)
			}
		}
		add(0, "name", name0)
		add(0, "weight", weight0)
		row1 := int(slot1) % 25 // past the rows the form reads too
		add(row1, "name", name1)
		add(row1, "weight", weight1)
		for i := 0; i < int(extra)%25; i++ {
			add(2+i, "name", fmt.Sprintf("class-%d", i))
			add(2+i, "weight", strconv.Itoa(i*7%101))
		}

		form := ParsePolicy(v)
		p, errs := form.Validate()
		if errs.Any() {
			checkFieldErrors(t, errs, policyFieldRE, len(form.Classes))
			return
		}

		if len(p.Classes) > MaxPriorityClasses || (p.Prioritization == domain.TaskRanking && len(p.Classes) == 0) {
			t.Fatalf("accepted %d classes under %s", len(p.Classes), p.Prioritization)
		}
		names := map[string]bool{}
		for _, c := range p.Classes {
			if !dnsLabel.MatchString(c.Name) || len(c.Name) > MaxTeamName || names[c.Name] {
				t.Fatalf("accepted class name %q", c.Name)
			}
			names[c.Name] = true
			if c.Weight < 0 || c.Weight > 100 {
				t.Fatalf("accepted weight %d for %s", c.Weight, c.Name)
			}
		}
		wpcs := domain.BuildPriorityClasses(domain.DefaultSettings, p)
		if len(wpcs) != len(p.Classes) {
			t.Fatalf("%d classes gave %d WorkloadPriorityClasses", len(p.Classes), len(wpcs))
		}
		for i, w := range wpcs {
			c := p.Classes[i]
			if w.Name == nil || *w.Name != c.Name || w.Value == nil {
				t.Fatalf("WorkloadPriorityClass %d is %+v for class %+v", i, w, c)
			}
			if *w.Value < 0 || *w.Value > 100 {
				t.Errorf("class %s has value %d, outside 0-100", c.Name, *w.Value)
			}
			want := c.Weight
			if p.Prioritization == domain.FirstComeFirstServe {
				want = 0
			}
			if *w.Value != want {
				t.Errorf("class %s has value %d under %s, want %d", c.Name, *w.Value, p.Prioritization, want)
			}
			if w.Annotations[domain.WeightAnnotation] != strconv.Itoa(int(c.Weight)) {
				t.Errorf("class %s keeps weight %q, want %d", c.Name, w.Annotations[domain.WeightAnnotation], c.Weight)
			}
		}
		cohort, err := domain.BuildCohort(domain.DefaultSettings, p)
		if err != nil {
			t.Fatalf("BuildCohort: %v", err)
		}
		var stored domain.Policy
		if err := json.Unmarshal([]byte(cohort.Annotations[domain.PolicyAnnotation]), &stored); err != nil {
			t.Fatalf("policy annotation: %v", err)
		}
		if diff := cmp.Diff(p, stored); diff != "" {
			t.Fatalf("policy annotation round trip (-policy +stored):\n%s", diff)
		}
		// The page shows the stored policy back; saving it unchanged stores
		// the same policy.
		back := FromPolicy(p)
		pv := url.Values{"prioritization": {back.Prioritization}, "idleAllocation": {back.IdleAllocation}}
		for i, c := range back.Classes {
			pv.Set(fmt.Sprintf("class.%d.name", i), c.Name)
			pv.Set(fmt.Sprintf("class.%d.weight", i), c.Weight)
		}
		again, errs := ParsePolicy(pv).Validate()
		if errs.Any() {
			t.Fatalf("the stored policy shown back has errors on %v", errs.Fields())
		}
		if diff := cmp.Diff(p, again); diff != "" {
			t.Fatalf("policy form round trip (-saved +resaved):\n%s", diff)
		}
	})
}
