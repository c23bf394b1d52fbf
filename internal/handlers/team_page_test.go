package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
)

// slowPreemptions is a task history whose preemption counts come when
// answer is closed.
type slowPreemptions struct {
	*taskHistory
	answer chan struct{}
}

func (h slowPreemptions) PreemptionsByTeam(ctx context.Context, w taskhistory.Window, team string) ([]taskhistory.PreemptedBy, []taskhistory.Period, error) {
	select {
	case <-h.answer:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	return h.taskHistory.PreemptionsByTeam(ctx, w, team)
}

// A team's page keeps its body between requests, and shows what its
// sources answer as soon as they do: the task history's count that was
// pending, and whichever chart range each request asks for.
func TestTeamPageFollowsItsSources(t *testing.T) {
	f := newFixture(t, 2, 10)
	history := slowPreemptions{taskHistory: &taskHistory{byTeam: []taskhistory.PreemptedBy{
		{Team: "team-001", PreemptorTeam: "team-000", Count: 3, GPUHoursLost: 1.5}}}, answer: make(chan struct{})}
	f.cfg.TaskHistory = history
	f.cfg.Prometheus = prometheus{util: map[string]float64{f.settings.Namespace("team-001"): 40}}
	h := f.handler()

	// Until the charts are drawn, with the task history's count pending:
	// then nothing but that count changes the page.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := webtest.Get(t, h, "/usage/team-001")
		webtest.MustContain(t, "/usage/team-001 before the task history answers", body, "Counting from the task history…")
		if !strings.Contains(body, "Reading the charts from Prometheus…") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/usage/team-001 still reads its charts after 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(history.answer)
	for {
		_, body := webtest.Get(t, h, "/usage/team-001")
		if strings.Contains(body, `<tr data-team="team-000">`) {
			webtest.MustNotContain(t, "/usage/team-001 once the task history answered", body, "Counting from the task history…")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/usage/team-001 still does not show the task history's count 10 s after it answered:\n%s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	ranges := metrics.RangeNames()
	for _, r := range append(ranges, ranges...) {
		_, body := webtest.Get(t, h, "/usage/team-001?range="+r)
		webtest.MustContain(t, "/usage/team-001?range="+r, body, `href="/usage/team-001?range=`+r+`" aria-current="true"`)
		if n := strings.Count(body, `aria-current="true"`); n != 1 {
			t.Errorf("/usage/team-001?range=%s marks %d ranges current, want one", r, n)
		}
	}
}
