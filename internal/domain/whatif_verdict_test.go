package domain

import "testing"

// The verdict says in one sentence what Kueue would do; borrowing is of
// quota, whichever resource the job asks for (vCPU on Kueue's examples).
func TestWhatIfVerdict(t *testing.T) {
	for _, tc := range []struct {
		a    WhatIfAnswer
		want string
	}{
		{WhatIfAnswer{Admitted: true}, "It would start now, within the team's quota."},
		{WhatIfAnswer{Admitted: true, Borrowing: true}, "It would start now, on quota borrowed from other teams."},
		{WhatIfAnswer{Admitted: true, Borrowing: true, Preempts: []ImpactTask{{Name: "a"}, {Name: "b"}}}, "It would start now, by preempting 2 tasks."},
		{WhatIfAnswer{Position: 3}, "It would wait, at position 3 in its team's queue."},
	} {
		if got := tc.a.Verdict(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.a, got, tc.want)
		}
	}
}
