package form

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/openquota/console/internal/domain"
)

// MaxPriorityClasses is how many task priority classes a policy may have.
const MaxPriorityClasses = 10

// ClassRow is one priority class as typed; LongWait is its own long-wait
// alert in minutes (blank: the policy's).
type ClassRow struct{ Name, Weight, LongWait string }

// PolicyForm is the cluster policy form as typed.
type PolicyForm struct {
	Prioritization string
	IdleAllocation string
	Classes        []ClassRow
	// LongWait (minutes) and IdleUtilization (%) are the insights'
	// thresholds; blank takes the defaults.
	LongWait, IdleUtilization string
	// Borrowing (minutes) is the sustained-borrowing threshold.
	Borrowing string
}

// maxLongWaitMinutes bounds a long-wait alert: a week.
const maxLongWaitMinutes = 7 * 24 * 60

// ParsePolicy reads a posted policy form; blank class rows are dropped.
func ParsePolicy(v url.Values) PolicyForm {
	p := PolicyForm{Prioritization: v.Get("prioritization"), IdleAllocation: v.Get("idleAllocation"),
		LongWait: strings.TrimSpace(v.Get("alerts.longWait")), IdleUtilization: strings.TrimSpace(v.Get("alerts.idleUtilization")),
		Borrowing: strings.TrimSpace(v.Get("alerts.borrowing"))}
	for i := 0; i < MaxPriorityClasses*2; i++ {
		row := ClassRow{
			Name:     strings.TrimSpace(v.Get(fmt.Sprintf("class.%d.name", i))),
			Weight:   strings.TrimSpace(v.Get(fmt.Sprintf("class.%d.weight", i))),
			LongWait: strings.TrimSpace(v.Get(fmt.Sprintf("class.%d.longWait", i))),
		}
		if row.Name != "" || row.Weight != "" || row.LongWait != "" {
			p.Classes = append(p.Classes, row)
		}
	}
	return p
}

// FromPolicy fills the form from the stored policy.
func FromPolicy(p domain.Policy) PolicyForm {
	f := PolicyForm{Prioritization: string(p.Prioritization), IdleAllocation: string(p.IdleAllocation),
		LongWait: blankZero(p.Alerts.LongWaitMinutes), IdleUtilization: blankZero(p.Alerts.IdleUtilizationPercent),
		Borrowing: blankZero(p.Alerts.BorrowingMinutes)}
	for _, c := range p.Classes {
		f.Classes = append(f.Classes, ClassRow{Name: c.Name, Weight: strconv.Itoa(int(c.Weight)), LongWait: blankZero(c.LongWaitMinutes)})
	}
	return f
}

// Validate checks the form and converts it.
func (f PolicyForm) Validate() (domain.Policy, Errors) {
	var errs Errors
	var p domain.Policy
	p.Prioritization = oneOf(&errs, "prioritization", f.Prioritization, "Choose first-come-first-serve or task ranking.",
		domain.FirstComeFirstServe, domain.TaskRanking)
	p.IdleAllocation = oneOf(&errs, "idleAllocation", f.IdleAllocation, "Choose first-come-first-serve or fair share.",
		domain.IdleFirstComeFirstServe, domain.IdleFairShare)
	if len(f.Classes) > MaxPriorityClasses {
		errs.Add("classes", fmt.Sprintf("Use at most %d priority classes.", MaxPriorityClasses))
	}
	if p.Prioritization == domain.TaskRanking && len(f.Classes) == 0 {
		errs.Add("classes", "Task ranking needs at least one priority class.")
	}
	seen := map[string]bool{}
	for i, c := range f.Classes {
		nameField, weightField := fmt.Sprintf("class.%d.name", i), fmt.Sprintf("class.%d.weight", i)
		switch {
		case c.Name == "":
			errs.Add(nameField, "Enter a class name.")
		case len(c.Name) > MaxTeamName || !dnsLabel.MatchString(c.Name):
			errs.Add(nameField, "Use lowercase letters, digits and '-' (at most 40), starting and ending with a letter or digit.")
		case seen[c.Name]:
			errs.Add(nameField, "This class is already listed above.")
		}
		seen[c.Name] = true
		w, ok := wholeNumber(c.Weight, 0, 100)
		if !ok {
			errs.Add(weightField, "Enter a whole number from 0 to 100.")
		}
		longWait := optionalWhole(&errs, fmt.Sprintf("class.%d.longWait", i), c.LongWait, 1, maxLongWaitMinutes,
			"Enter whole minutes from 1 to 10080 (a week), or leave it blank for the policy's.")
		p.Classes = append(p.Classes, domain.PriorityClass{Name: c.Name, Weight: int32(w), LongWaitMinutes: longWait})
	}
	p.Alerts.LongWaitMinutes = optionalWhole(&errs, "alerts.longWait", f.LongWait, 1, maxLongWaitMinutes,
		"Enter whole minutes from 1 to 10080 (a week), or leave it blank for the default.")
	p.Alerts.IdleUtilizationPercent = optionalWhole(&errs, "alerts.idleUtilization", f.IdleUtilization, 1, 100,
		"Enter a whole percentage from 1 to 100, or leave it blank for the default.")
	p.Alerts.BorrowingMinutes = optionalWhole(&errs, "alerts.borrowing", f.Borrowing, 1, maxLongWaitMinutes,
		"Enter whole minutes from 1 to 10080 (a week), or leave it blank for the default.")
	return p, errs
}

// optionalWhole is a whole number in [lo, hi] typed in field, 0 when left
// blank; msg is the field's error otherwise.
func optionalWhole(errs *Errors, field, typed string, lo, hi int64, msg string) int {
	if typed == "" {
		return 0
	}
	n, ok := wholeNumber(typed, lo, hi)
	if !ok {
		errs.Add(field, msg)
		return 0
	}
	return int(n)
}

// blankZero shows 0 (the default) as a blank field.
func blankZero(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}
