package app

import (
	"errors"

	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/taskhistory"
)

// What the integration tests (package app_test) reach inside an App.

// Pages are what the pages are built on; a test may change some before
// handlers.New.
func (a *App) Pages() handlers.Config { return a.pages }

// NewTaskHistory is the task history of store, or, without one, none, for
// the reason err.
func NewTaskHistory(store *taskhistory.Store, err error) *TaskHistory {
	if store == nil && err == nil {
		err = errors.New("the console runs without a task history")
	}
	return &TaskHistory{store: store, err: err}
}
