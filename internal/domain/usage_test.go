package domain

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var inf = math.Inf(1)

func TestLentShares(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []QuotaUse
		want []float64
	}{
		{"nobody borrows", []QuotaUse{{8, 2, inf}, {4, 4, inf}}, []float64{0, 0}},
		{"one lender takes it all", []QuotaUse{{8, 2, inf}, {4, 7, inf}}, []float64{3, 0}},
		{"split by idle quota, not by nominal", []QuotaUse{
			{Nominal: 8, Used: 2, LendingLimit: inf}, // idle 6
			{Nominal: 4, Used: 1, LendingLimit: inf}, // idle 3
			{Nominal: 2, Used: 5, LendingLimit: inf}, // borrows 3
		}, []float64{2, 1, 0}},
		{"two borrowers add up", []QuotaUse{{4, 0, inf}, {4, 0, inf}, {1, 3, inf}, {1, 2, inf}}, []float64{1.5, 1.5, 0, 0}},
		{"a queue that does not lend lends nothing", []QuotaUse{{8, 0, 0}, {4, 0, inf}, {0, 2, inf}}, []float64{0, 2, 0}},
		{"lending limit caps the idle quota", []QuotaUse{{8, 0, 2}, {2, 0, inf}, {0, 2, inf}}, []float64{1, 1, 0}},
		{"borrowed beyond the cohort's idle quota is nobody's", []QuotaUse{{2, 1, inf}, {0, 4, inf}}, []float64{1, 0}},
		{"over-quota lender lends nothing", []QuotaUse{{2, 3, inf}, {2, 3, inf}}, []float64{0, 0}},
		{"empty", nil, []float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, LentShares(tc.in), cmpopts.EquateEmpty(), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("LentShares(%v) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
