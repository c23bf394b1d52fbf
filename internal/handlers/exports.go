package handlers

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
)

// exportGate counts the running exports. Unlike live streams, the user of
// auth mode none ("") is counted too: one person at the machine.
type exportGate struct{ *gate }

func newExportGate(l ExportLimits) exportGate { return exportGate{newGate(l, DefaultExportLimits)} }

// enter admits one more export of user, or says why not.
func (g exportGate) enter(user string) (leave func(), refusal string) {
	leave, full := g.gate.enter(user)
	switch full {
	case userFull:
		return nil, fmt.Sprintf("Too many downloads at once: you already have %d exports of the task history running. "+
			"Wait until one of them finishes, then try again.", g.running(user))
	case totalFull:
		return nil, "Too many downloads at once: the console is busy with other exports of the task history. Try again in a minute."
	}
	return leave, ""
}

// run runs export, a CSV export of the task history, within the export
// limits: beyond them it answers 429 and why.
func (g exportGate) run(c echo.Context, export func() error) error {
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
