package handlers

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/openquota/console/internal/domain"
)

// The teams table and its CSV state the absolute borrow and lend limits
// in the Lending column, beside the percentage.
func TestLendingLabel(t *testing.T) {
	p5 := func(set func(*domain.QuotaInput)) []domain.QuotaInput {
		q := domain.QuotaInput{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](8)}
		set(&q)
		return []domain.QuotaInput{q}
	}
	for _, tc := range []struct {
		team domain.Team
		want string
	}{
		{domain.Team{Lending: domain.LendAndBorrow, BorrowLimitPercent: 50, Quota: p5(func(*domain.QuotaInput) {})}, "Lend and borrow (50 %)"},
		{domain.Team{Lending: domain.LendAndBorrow, BorrowLimitPercent: 50, Quota: p5(func(q *domain.QuotaInput) {
			q.BorrowGPUs, q.LendGPUs, q.LendVCPU = ptr.To[int64](6), ptr.To[int64](4), ptr.To[int64](96)
		})}, "Lend and borrow (50 %; at most ml.p5.48xlarge: 6 GPUs; lends at most ml.p5.48xlarge: 4 GPUs, 96 vCPU)"},
		{domain.Team{Lending: domain.Lend, Quota: p5(func(q *domain.QuotaInput) { q.LendGPUs = ptr.To[int64](2) })},
			"Lend only (lends at most ml.p5.48xlarge: 2 GPUs)"},
		{domain.Team{Lending: domain.Lend, Quota: p5(func(*domain.QuotaInput) {})}, "Lend only"},
		{domain.Team{Lending: domain.DontLend, Quota: p5(func(*domain.QuotaInput) {})}, "Don't lend"},
	} {
		if got := lendingLabel(tc.team); got != tc.want {
			t.Errorf("lendingLabel = %q, want %q", got, tc.want)
		}
	}
}

// The totals row says how much of the teams' borrowing came from quota the
// cohorts hold themselves, which no team lends; without it, borrowed and
// lent simply agree.
func TestTotalsNameWhatCohortsLent(t *testing.T) {
	row := func(team string, borrowed, lent int64) domain.TeamUsage {
		return domain.TeamUsage{Team: team, Borrowed: domain.Amount{GPUs: borrowed}, Lent: domain.Amount{GPUs: lent}}
	}
	for _, tc := range []struct {
		name  string
		teams []domain.TeamUsage
		want  string
	}{
		{"teams lent it all", []domain.TeamUsage{row("a", 4, 0), row("b", 0, 4)}, "4"},
		{"a cohort gave part", []domain.TeamUsage{row("a", 6, 0), row("b", 0, 2)}, "2 + 4 from cohorts' own quota"},
		{"nothing borrowed", []domain.TeamUsage{row("a", 0, 0)}, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := totalRowOf(tc.teams, resourceOf("gpu"), nil).Lent; got != tc.want {
				t.Errorf("total Lent = %q, want %q", got, tc.want)
			}
		})
	}
}
