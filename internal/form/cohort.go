package form

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/openquota/console/internal/domain"
)

// CohortForm is the cohort form as typed: a cohort under the console's own,
// with an optional quota of its own on one instance type.
type CohortForm struct {
	// Suffix is what the admin types; the cohort is named
	// "<console cohort>-<suffix>".
	Suffix, Parent, FairShareWeight string
	InstanceType, GPUs              string
}

// ParseCohort reads a posted cohort form.
func ParseCohort(v url.Values) CohortForm {
	return CohortForm{Suffix: strings.TrimSpace(v.Get("suffix")), Parent: strings.TrimSpace(v.Get("parent")),
		FairShareWeight: strings.TrimSpace(v.Get("fairShareWeight")), InstanceType: strings.TrimSpace(v.Get("instanceType")),
		GPUs: strings.TrimSpace(v.Get("gpus"))}
}

// FromCohort fills the form from a cohort (its edit form).
func FromCohort(s domain.Settings, c domain.CohortAllocation) CohortForm {
	f := CohortForm{Suffix: strings.TrimPrefix(c.Name, s.Cohort+"-"), Parent: c.Parent}
	if c.FairShareWeight != nil {
		f.FairShareWeight = strconv.FormatInt(*c.FairShareWeight, 10)
	}
	if len(c.Quota) > 0 {
		f.InstanceType = c.Quota[0].InstanceType
		if g := c.Quota[0].GPUs; g != nil {
			f.GPUs = strconv.FormatInt(*g, 10)
		}
	}
	return f
}

// Validate checks the form against the cohorts the cluster has (parents:
// each cohort's parent; consoles: the cohorts a cohort may be put under).
func (f CohortForm) Validate(s domain.Settings, shapes domain.ShapeLookup, parents map[string]string, consoles []string) (domain.CohortAllocation, Errors) {
	var errs Errors
	c := domain.CohortAllocation{Name: s.Cohort + "-" + f.Suffix, Parent: f.Parent}
	switch {
	case f.Suffix == "":
		errs.Add("suffix", "Enter a name.")
	case len(c.Name) > 63:
		errs.Add("suffix", fmt.Sprintf("Use at most %d characters.", 63-len(s.Cohort)-1))
	case !dnsLabel.MatchString(f.Suffix):
		errs.Add("suffix", "Use lowercase letters, digits and '-', starting and ending with a letter or digit.")
	}
	known := false
	for _, k := range consoles {
		known = known || k == f.Parent
	}
	switch {
	case !known:
		errs.Add("parent", "Choose one of the console's cohorts.")
	case errs.Get("suffix") == "":
		if msg := domain.CohortParentProblem(c.Name, c.Parent, parents); msg != "" {
			errs.Add("parent", msg)
		}
	}
	if f.FairShareWeight != "" {
		if w, ok := wholeNumber(f.FairShareWeight, 0, 100); ok {
			c.FairShareWeight = &w
		} else {
			errs.Add("fairShareWeight", "Enter a whole number from 0 to 100, or leave it empty.")
		}
	}
	if f.InstanceType != "" || f.GPUs != "" {
		row := QuotaRow{InstanceType: f.InstanceType, GPUs: f.GPUs}
		if q, ok := validateRow(0, row, shapes, map[string]bool{}, &errs); ok {
			c.Quota = []domain.QuotaInput{q}
		}
	}
	return c, errs
}
