package handlers

import (
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// ownerColumns are the CSV columns naming a task's owner, next to the
// column of its Workload's name (which stays, so spreadsheets that read it
// keep working). Both are empty for a Workload without an owner.
var ownerColumns = []string{"Owner kind", "Owner name"}

// ownerCells are a task's cells of ownerColumns.
func ownerCells(n domain.TaskName) []string { return []string{n.OwnerKind, n.OwnerName} }

// taskLabel is a task's name as the pages show it.
func taskLabel(n domain.TaskName) templates.TaskLabel {
	l := templates.TaskLabel{Text: n.Shown(), Title: n.Aside()}
	if n.OwnerName != "" && l.Title != "" {
		l.Title = l.Text + " — " + l.Title // the shown name may be cut short
	}
	return l
}
