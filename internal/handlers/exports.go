package handlers

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
)

// ExportLimits cap the CSV exports of the task history running at once, per
// user and in all: each one reads the store and may last as long as its
// client takes to read it (up to the write timeout).
type ExportLimits struct{ PerUser, Total int }

// DefaultExportLimits let a person download a couple of reports at once,
// and keep the store's connections for the pages and the recorder.
var DefaultExportLimits = ExportLimits{PerUser: 2, Total: 8}

// exportGate counts the running exports. Unlike live streams, the user of
// auth mode none ("") is counted too: one person at the machine.
type exportGate struct {
	limits ExportLimits

	mu      sync.Mutex
	total   int
	perUser map[string]int
}

func newExportGate(l ExportLimits) *exportGate {
	if l.PerUser <= 0 || l.Total <= 0 {
		l = DefaultExportLimits
	}
	return &exportGate{limits: l, perUser: map[string]int{}}
}

// enter admits one more export of user, or says why not.
func (g *exportGate) enter(user string) (leave func(), refusal string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.perUser[user] >= g.limits.PerUser:
		return nil, fmt.Sprintf("Too many downloads at once: you already have %d exports of the task history running. "+
			"Wait until one of them finishes, then try again.", g.perUser[user])
	case g.total >= g.limits.Total:
		return nil, "Too many downloads at once: the console is busy with other exports of the task history. Try again in a minute."
	}
	g.total++
	g.perUser[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.total--
			if g.perUser[user]--; g.perUser[user] <= 0 {
				delete(g.perUser, user)
			}
		})
	}, ""
}

// run runs export, a CSV export of the task history, within the export
// limits: beyond them it answers 429 and why.
func (g *exportGate) run(c echo.Context, export func() error) error {
	leave, refusal := g.enter(auth.From(c).Name)
	if refusal != "" {
		return echo.NewHTTPError(http.StatusTooManyRequests, refusal)
	}
	defer leave()
	return export()
}

// summaryConcurrency bounds the usage summaries computed at once: a summary
// of up to a year reads every admission of it, and each window asked for is
// a new one.
const summaryConcurrency = 2

// summarySlots are the slots of the usage summaries computed at once.
type summarySlots chan struct{}

// take waits for one of the slots (or the end of ctx) and returns its
// release.
func (s summarySlots) take(ctx context.Context) (release func(), err error) {
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
