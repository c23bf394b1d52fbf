// Package form holds the console's typed forms: each parses what the browser
// posted, keeps every value as typed (so a rejected form shows it back), and
// validates into field errors worded for the admin. The same validation
// judges what the console applies without a form (a revision, adopted hand
// edits), so it is the one home of the allocation and policy rules. It must
// not import client-go, echo, templ, or the console's cluster, write,
// handlers and web packages.
package form

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/openquota/console/internal/domain"
)

// Limits of a team allocation.
const (
	MaxTeamName     = 40
	MaxQuotaRows    = 15
	MaxMembers      = 100
	MaxBorrowPct    = 500
	DefaultBorrow   = "50"
	maxMemberName   = 253
	maxQuotaNumeric = 10_000_000 // the largest any single field accepts
)

// Largest accepted value per quota field: far beyond any cluster, and small
// enough that derived byte counts and percentages never overflow.
var quotaMax = map[string]int64{
	"count": 10_000, "gpus": 100_000, "neuron": 100_000, "vcpu": 10_000_000, "memoryGiB": 100_000_000, "partitions": 700_000,
	"borrowGPUs": 100_000, "borrowNeuron": 100_000, "borrowVCPU": 10_000_000, "borrowMemoryGiB": 100_000_000,
	"lendGPUs": 100_000, "lendNeuron": 100_000, "lendVCPU": 10_000_000, "lendMemoryGiB": 100_000_000,
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Errors are field errors keyed by field name ("name", "quota.2.gpus"); the
// page shows each next to its field.
type Errors struct{ items []fieldError }

type fieldError struct{ field, message string }

// Add records the first error of a field.
func (e *Errors) Add(field, message string) {
	if e.Get(field) == "" {
		e.items = append(e.items, fieldError{field, message})
	}
}

// Get returns the error of a field, or "".
func (e Errors) Get(field string) string {
	for _, it := range e.items {
		if it.field == field {
			return it.message
		}
	}
	return ""
}

// Forget drops the error of a field: a rule of the form that the caller
// knows does not apply.
func (e *Errors) Forget(field string) {
	e.items = slices.DeleteFunc(e.items, func(it fieldError) bool { return it.field == field })
}

// Any reports whether there is at least one error.
func (e Errors) Any() bool { return len(e.items) > 0 }

// Fields lists the fields with errors, in the order found.
func (e Errors) Fields() []string {
	out := make([]string, len(e.items))
	for i, it := range e.items {
		out[i] = it.field
	}
	return out
}

// QuotaRow is one quota row as typed.
type QuotaRow struct {
	InstanceType string
	Count        string
	GPUs         string
	Neuron       string
	VCPU         string
	MemoryGiB    string
	// Partition is a MIG profile ("mig-1g.10gb"), Partitions how many.
	Partition, Partitions string
	// Absolute borrow limits, per resource ("" takes the percentage).
	BorrowGPUs, BorrowNeuron, BorrowVCPU, BorrowMemoryGiB string
	// Absolute lend limits, per resource ("" lends all).
	LendGPUs, LendNeuron, LendVCPU, LendMemoryGiB string
}

func (r QuotaRow) empty() bool {
	return r.InstanceType == "" && r.Count == "" && r.GPUs == "" && r.Neuron == "" && r.VCPU == "" && r.MemoryGiB == "" &&
		r.Partition == "" && r.Partitions == "" &&
		r.BorrowGPUs == "" && r.BorrowNeuron == "" && r.BorrowVCPU == "" && r.BorrowMemoryGiB == "" &&
		r.LendGPUs == "" && r.LendNeuron == "" && r.LendVCPU == "" && r.LendMemoryGiB == ""
}

// TeamForm is the team allocation form as typed.
type TeamForm struct {
	TeamFields
	Quota []QuotaRow
}

// TeamFields are the form's values but its quota rows: the shape of the
// page's view model (templates.TeamFields), which is converted from it.
type TeamFields struct {
	Name            string
	Description     string
	Enabled         string // "true" or "false"
	Users           string // one per line
	Groups          string // one per line
	FairShareWeight string
	Preemption      string
	Lending         string
	BorrowLimit     string
	Cohort          string // "" for the console's cohort
	Order           string // OrderPriority or OrderRecentUse
}

// The orders of a team's pending tasks the form offers.
const (
	OrderPriority  = "priority"
	OrderRecentUse = "recentUse"
)

// text is the field holding one of domain.TeamTexts.
func (f *TeamFields) text(key string) *string {
	switch key {
	case "description":
		return &f.Description
	}
	panic("form: no field for the team text " + key)
}

// NewTeamForm is an empty form with the documented defaults.
func NewTeamForm() TeamForm {
	return TeamForm{TeamFields: TeamFields{Enabled: "true", FairShareWeight: "0", Preemption: string(domain.PreemptLowerPriority),
		Lending: string(domain.LendAndBorrow), BorrowLimit: DefaultBorrow, Order: OrderPriority}, Quota: []QuotaRow{{}}}
}

// ParseTeam reads a posted form. Quota rows come as quota.N.field; blank rows
// are dropped.
func ParseTeam(v url.Values) TeamForm {
	t := TeamForm{TeamFields: TeamFields{
		Name:            strings.TrimSpace(v.Get("name")),
		Enabled:         v.Get("enabled"),
		Users:           v.Get("users"),
		Groups:          v.Get("groups"),
		FairShareWeight: strings.TrimSpace(v.Get("fairShareWeight")),
		Preemption:      v.Get("preemption"),
		Lending:         v.Get("lending"),
		BorrowLimit:     strings.TrimSpace(v.Get("borrowLimit")),
		Cohort:          strings.TrimSpace(v.Get("cohort")),
		Order:           v.Get("order"),
	}}
	for _, text := range domain.TeamTexts {
		*t.text(text.Key) = strings.TrimSpace(v.Get(text.Key))
	}
	for i := 0; i < MaxQuotaRows*2; i++ {
		p := fmt.Sprintf("quota.%d.", i)
		row := QuotaRow{
			InstanceType: strings.TrimSpace(v.Get(p + "instanceType")),
			Count:        strings.TrimSpace(v.Get(p + "count")),
			GPUs:         strings.TrimSpace(v.Get(p + "gpus")),
			Neuron:       strings.TrimSpace(v.Get(p + "neuron")),
			VCPU:         strings.TrimSpace(v.Get(p + "vcpu")),
			MemoryGiB:    strings.TrimSpace(v.Get(p + "memoryGiB")),
			Partition:    strings.TrimSpace(v.Get(p + "partition")),
			Partitions:   strings.TrimSpace(v.Get(p + "partitions")),

			BorrowGPUs:      strings.TrimSpace(v.Get(p + "borrowGPUs")),
			BorrowNeuron:    strings.TrimSpace(v.Get(p + "borrowNeuron")),
			BorrowVCPU:      strings.TrimSpace(v.Get(p + "borrowVCPU")),
			BorrowMemoryGiB: strings.TrimSpace(v.Get(p + "borrowMemoryGiB")),

			LendGPUs:      strings.TrimSpace(v.Get(p + "lendGPUs")),
			LendNeuron:    strings.TrimSpace(v.Get(p + "lendNeuron")),
			LendVCPU:      strings.TrimSpace(v.Get(p + "lendVCPU")),
			LendMemoryGiB: strings.TrimSpace(v.Get(p + "lendMemoryGiB")),
		}
		if !row.empty() {
			t.Quota = append(t.Quota, row)
		}
	}
	return t
}

// FromTeam fills the form from a stored allocation (the edit form).
func FromTeam(t domain.Team) TeamForm {
	f := TeamForm{TeamFields: TeamFields{
		Name: t.Name, Enabled: strconv.FormatBool(t.Enabled),
		FairShareWeight: strconv.FormatInt(t.FairShareWeight, 10), Preemption: string(t.Preemption),
		Lending: string(t.Lending), BorrowLimit: strconv.FormatInt(t.BorrowLimitPercent, 10), Cohort: t.Cohort,
		Order: OrderPriority,
	}}
	if t.RecentUseOrder {
		f.Order = OrderRecentUse
	}
	for _, text := range domain.TeamTexts {
		*f.text(text.Key) = *text.Of(&t)
	}
	var users, groups []string
	for _, m := range t.Members {
		if m.Kind == "Group" {
			groups = append(groups, m.Name)
		} else {
			users = append(users, m.Name)
		}
	}
	f.Users, f.Groups = strings.Join(users, "\n"), strings.Join(groups, "\n")
	str := func(p *int64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatInt(*p, 10)
	}
	for _, q := range t.Quota {
		f.Quota = append(f.Quota, QuotaRow{InstanceType: q.InstanceType, Count: str(q.Count), GPUs: str(q.GPUs),
			Neuron: str(q.Neuron), VCPU: str(q.VCPU), MemoryGiB: str(q.MemoryGiB), Partition: q.Partition, Partitions: str(q.Partitions),
			BorrowGPUs: str(q.BorrowGPUs), BorrowNeuron: str(q.BorrowNeuron), BorrowVCPU: str(q.BorrowVCPU), BorrowMemoryGiB: str(q.BorrowMemoryGiB),
			LendGPUs: str(q.LendGPUs), LendNeuron: str(q.LendNeuron), LendVCPU: str(q.LendVCPU), LendMemoryGiB: str(q.LendMemoryGiB)})
	}
	if len(f.Quota) == 0 {
		f.Quota = []QuotaRow{{}}
	}
	return f
}

// Validate checks the form and converts it. shapes resolves instance types
// (catalog merged with live nodes). On any error the Team is incomplete and
// must not be written.
func (f TeamForm) Validate(shapes domain.ShapeLookup) (domain.Team, Errors) {
	var errs Errors
	t := domain.Team{Name: f.Name, Cohort: f.Cohort}
	if f.Cohort != "" && (len(f.Cohort) > 253 || !dnsLabel.MatchString(f.Cohort)) {
		errs.Add("cohort", "Choose a cohort from the list.")
	}

	switch {
	case f.Name == "":
		errs.Add("name", "Enter a team name.")
	case len(f.Name) > MaxTeamName:
		errs.Add("name", fmt.Sprintf("Use at most %d characters (this has %d).", MaxTeamName, len(f.Name)))
	case !dnsLabel.MatchString(f.Name):
		errs.Add("name", "Use lowercase letters, digits and '-', starting and ending with a letter or digit.")
	}
	for _, text := range domain.TeamTexts {
		v := *f.text(text.Key)
		if !utf8.ValidString(v) {
			errs.Add(text.Key, fmt.Sprintf("The %s contains bytes that are not valid UTF-8 text.", text.Words))
		} else if n := len([]rune(v)); n > text.Max {
			errs.Add(text.Key, fmt.Sprintf("Use at most %d characters (this has %d).", text.Max, n))
		} else if strings.ContainsFunc(v, bidiControl) {
			errs.Add(text.Key, fmt.Sprintf("The %s contains characters that reverse the direction of the text around them (such as U+202E), which can make it read as something else; remove them.", text.Words))
		} else {
			*text.Of(&t) = v
		}
	}
	switch f.Enabled {
	case "true", "false":
		t.Enabled = f.Enabled == "true"
	default:
		errs.Add("enabled", "Choose Enabled or Disabled.")
	}
	t.Members = parseMembers(f.Users, "User", "users", &errs)
	t.Members = append(t.Members, parseMembers(f.Groups, "Group", "groups", &errs)...)
	if len(t.Members) > MaxMembers {
		errs.Add("users", fmt.Sprintf("Add at most %d users and groups together.", MaxMembers))
	}

	if w, ok := wholeNumber(f.FairShareWeight, 0, 100); ok {
		t.FairShareWeight = w
	} else {
		errs.Add("fairShareWeight", "Enter a whole number from 0 to 100.")
	}
	t.Preemption = oneOf(&errs, "preemption", f.Preemption, "Choose Never or Lower priority.",
		domain.PreemptNever, domain.PreemptLowerPriority)
	switch f.Order {
	case OrderPriority, "": // forms from before the field send none
	case OrderRecentUse:
		t.RecentUseOrder = true
	default:
		errs.Add("order", "Choose by priority, then arrival, or by each namespace's recent use.")
	}
	t.Lending = oneOf(&errs, "lending", f.Lending, "Choose Lend and borrow, Lend, or Don't lend.",
		domain.LendAndBorrow, domain.Lend, domain.DontLend)
	if p, ok := wholeNumber(f.BorrowLimit, 1, MaxBorrowPct); ok {
		t.BorrowLimitPercent = p
	} else if t.Lending == domain.LendAndBorrow {
		errs.Add("borrowLimit", fmt.Sprintf("Enter a whole percentage from 1 to %d.", MaxBorrowPct))
	}

	switch {
	case len(f.Quota) > MaxQuotaRows:
		errs.Add("quota", fmt.Sprintf("Use at most %d instance types.", MaxQuotaRows))
	case len(f.Quota) == 0:
		errs.Add("quota", "Add at least one instance type: a team without quota could not run anything.")
	}
	seen := map[string]bool{}
	for i, row := range f.Quota {
		q, ok := validateRow(i, row, shapes, seen, &errs)
		if ok && q.HasAbsoluteBorrow() && t.Lending != domain.LendAndBorrow && errs.Get("lending") == "" {
			errs.Add(fmt.Sprintf("quota.%d.borrowGPUs", i), "Absolute borrow limits apply when the team lends and borrows: clear them, or choose Lend and borrow.")
			ok = false
		}
		if ok {
			shape, _ := shapes(q.InstanceType)
			for _, p := range t.LendLimitProblems(q, shape) {
				errs.Add(fmt.Sprintf("quota.%d.%s", i, p.Field), p.Message)
				ok = false
			}
		}
		if ok {
			t.Quota = append(t.Quota, q)
		}
	}
	return t, errs
}

func validateRow(i int, row QuotaRow, shapes domain.ShapeLookup, seen map[string]bool, errs *Errors) (domain.QuotaInput, bool) {
	field := func(name string) string { return fmt.Sprintf("quota.%d.%s", i, name) }
	q := domain.QuotaInput{InstanceType: row.InstanceType}
	shape, known := shapes(row.InstanceType)
	switch {
	case row.InstanceType == "":
		errs.Add(field("instanceType"), "Choose an instance type.")
		return q, false
	case !known:
		errs.Add(field("instanceType"), fmt.Sprintf("Unknown instance type %q.", row.InstanceType))
		return q, false
	case seen[row.InstanceType]:
		errs.Add(field("instanceType"), "This instance type already has a row above.")
		return q, false
	}
	seen[row.InstanceType] = true

	ok := true
	number := func(name, value string, min int64) *int64 {
		if value == "" {
			return nil
		}
		n, valid := wholeNumber(value, min, quotaMax[name])
		if !valid {
			errs.Add(field(name), fmt.Sprintf("Enter a whole number from %d to %d.", min, quotaMax[name]))
			ok = false
			return nil
		}
		return &n
	}
	q.Count = number("count", row.Count, 0)
	q.GPUs = number("gpus", row.GPUs, 0)
	q.Neuron = number("neuron", row.Neuron, 0)
	q.VCPU = number("vcpu", row.VCPU, 0)
	q.MemoryGiB = number("memoryGiB", row.MemoryGiB, 0)
	q.Partition, q.Partitions = row.Partition, number("partitions", row.Partitions, 0)
	q.BorrowGPUs = number("borrowGPUs", row.BorrowGPUs, 0)
	q.BorrowNeuron = number("borrowNeuron", row.BorrowNeuron, 0)
	q.BorrowVCPU = number("borrowVCPU", row.BorrowVCPU, 0)
	q.BorrowMemoryGiB = number("borrowMemoryGiB", row.BorrowMemoryGiB, 0)
	q.LendGPUs = number("lendGPUs", row.LendGPUs, 0)
	q.LendNeuron = number("lendNeuron", row.LendNeuron, 0)
	q.LendVCPU = number("lendVCPU", row.LendVCPU, 0)
	q.LendMemoryGiB = number("lendMemoryGiB", row.LendMemoryGiB, 0)
	if !ok {
		return q, false
	}
	if msg := partitionProblem(q, shape); msg != "" {
		errs.Add(field("partition"), msg)
		return q, false
	}
	switch {
	case q.BorrowGPUs != nil && shape.GPUs == 0 && *q.BorrowGPUs > 0:
		errs.Add(field("borrowGPUs"), fmt.Sprintf("%s has no GPUs to borrow.", shape.Type))
		return q, false
	case q.BorrowNeuron != nil && shape.Neuron == 0 && *q.BorrowNeuron > 0:
		errs.Add(field("borrowNeuron"), fmt.Sprintf("%s has no Neuron devices to borrow.", shape.Type))
		return q, false
	}
	switch {
	case q.Count != nil && (q.GPUs != nil || q.Neuron != nil):
		errs.Add(field("count"), "Give an instance count, or GPUs / Neuron devices, not both.")
	case q.GPUs != nil && q.Neuron != nil:
		errs.Add(field("gpus"), "Give GPUs or Neuron devices, not both.")
	case q.GPUs != nil && shape.GPUs == 0 && *q.GPUs > 0:
		errs.Add(field("gpus"), fmt.Sprintf("%s has no GPUs.", shape.Type))
	case q.Neuron != nil && shape.Neuron == 0 && *q.Neuron > 0:
		errs.Add(field("neuron"), fmt.Sprintf("%s has no Neuron devices.", shape.Type))
	case q.MemoryGiB != nil && q.VCPU == nil && q.Count == nil && q.GPUs == nil && q.Neuron == nil && q.Partitions == nil:
		errs.Add(field("count"), "Memory alone is not a quota: give GPUs, partitions, vCPUs or an instance count too.")
	case q.Count == nil && q.GPUs == nil && q.Neuron == nil && q.VCPU == nil && q.Partitions == nil:
		errs.Add(field("count"), "Give an instance count, GPUs, GPU partitions, Neuron devices or vCPUs.")
	default:
		return q, true
	}
	return q, false
}

// partitionProblem says what is wrong with a row's GPU partitions, "" when
// nothing is: a MIG profile the instance type's nodes offer, and how many.
func partitionProblem(q domain.QuotaInput, shape domain.InstanceShape) string {
	switch {
	case q.Partition == "" && q.Partitions == nil:
		return ""
	case q.Partition == "":
		return "Choose the partitions' MIG profile."
	}
	if _, ok := domain.PartitionSlices(q.Partition); !ok {
		return fmt.Sprintf("%q is not a MIG profile: choose one such as mig-1g.10gb.", truncate(q.Partition, 40))
	}
	offered := shape.Profiles()
	switch {
	case shape.GPUs == 0:
		return fmt.Sprintf("%s has no GPUs to partition.", shape.Type)
	case len(offered) == 0:
		return fmt.Sprintf("The cluster's %s nodes offer no MIG partitions (the NVIDIA device plugin's mixed strategy names them nvidia.com/mig-…).", shape.Type)
	case !slices.Contains(offered, q.Partition):
		return fmt.Sprintf("The cluster's %s nodes offer %s, not %s.", shape.Type, strings.Join(offered, ", "), q.Partition)
	case q.Partitions == nil && q.Count == nil:
		return "Give how many " + q.Partition + " partitions."
	}
	return ""
}

// bidiControl reports the characters that change the direction of the
// text around them: shown raw, they make a name or a text read as another.
func bidiControl(r rune) bool {
	return r == '\u061c' || r == '\u200e' || r == '\u200f' || ('\u202a' <= r && r <= '\u202e') || ('\u2066' <= r && r <= '\u2069')
}

// hiddenRune reports the characters a name must not hold: control and
// format characters (direction marks, zero-width ones), which print as
// nothing or change what is around them.
func hiddenRune(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

func parseMembers(text, kind, field string, errs *Errors) []domain.Member {
	var out []domain.Member
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		name := strings.TrimSpace(line)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		if len(name) > maxMemberName || !utf8.ValidString(name) || strings.ContainsFunc(name, hiddenRune) {
			errs.Add(field, fmt.Sprintf("%q is not a valid %s name (at most %d printable characters).", truncate(name, 40), strings.ToLower(kind), maxMemberName))
			continue
		}
		if strings.HasPrefix(name, domain.SystemNamePrefix) {
			errs.Add(field, fmt.Sprintf("%q is one of Kubernetes' own names (system:…), which stand for every user, every ServiceAccount or a cluster component; add people and their groups only.", truncate(name, 60)))
			continue
		}
		out = append(out, domain.Member{Kind: kind, Name: name})
	}
	return out
}

func wholeNumber(s string, min, max int64) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < min || n > max {
		return 0, false
	}
	return n, true
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// Lenient reads a row's numbers without judging them, for the live preview
// of derived values while the admin is still typing.
func (r QuotaRow) Lenient() domain.QuotaInput {
	num := func(s string) *int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > maxQuotaNumeric {
			return nil
		}
		return &n
	}
	return domain.QuotaInput{InstanceType: r.InstanceType, Count: num(r.Count), GPUs: num(r.GPUs),
		Neuron: num(r.Neuron), VCPU: num(r.VCPU), MemoryGiB: num(r.MemoryGiB), Partition: r.Partition, Partitions: num(r.Partitions)}
}

// oneOf is value when it is one of the choices, else the zero choice with
// msg as the field's error.
func oneOf[T ~string](errs *Errors, field, value, msg string, choices ...T) T {
	for _, c := range choices {
		if string(c) == value {
			return c
		}
	}
	errs.Add(field, msg)
	return ""
}
