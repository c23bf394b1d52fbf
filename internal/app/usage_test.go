package app_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/webtest"
)

// The usage dashboard's figures match what Kueue reports on the ClusterQueues.
func TestUsageAndTasksMatchKueue(t *testing.T) {
	c := newConsole(t)
	for _, team := range []string{"lender", "borrower"} {
		gpus := "4"
		if team == "borrower" {
			gpus = "2"
		}
		if code, _, body := c.post(t, "/teams", webtest.TeamForm(team, gpus)); code != 303 {
			t.Fatalf("create %s: %d\n%s", team, code, body)
		}
		t.Cleanup(func() { c.post(t, "/teams/"+team+"/delete", url.Values{}) })
	}
	c.submit(t, "borrower", "fits", 2)
	c.submit(t, "borrower", "borrows", 1)
	c.submit(t, "borrower", "too-big", 4)

	// Kueue settles the borrower's usage, and the lender's status, over a
	// few status updates; compare the dashboard with the ClusterQueue once
	// both queues show the same moment.
	kueueBorrowed := func() int64 {
		var n int64
		for _, f := range c.clusterQueue(t, "borrower").Status.FlavorsUsage {
			for _, r := range f.Resources {
				if r.Name == domain.ResourceGPU {
					n += r.Borrowed.Value()
				}
			}
		}
		return n
	}
	var rows map[string]map[string]string
	var b, l map[string]string
	var borrowed int64
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		borrowed = kueueBorrowed()
		rows = c.csv(t, "/usage?format=csv&resource=gpu")
		b, l = rows["borrower/"+c.settings.Namespace("borrower")], rows["lender/"+c.settings.Namespace("lender")]
		return b != nil && l != nil && borrowed == 1 && b["Borrowed (GPUs)"] == "1" && b["In use by tasks (GPUs)"] == "3" &&
			b["Pending demand (GPUs)"] == "4" && l["Lent (GPUs)"] != "0" && borrowed == kueueBorrowed(), nil
	})
	if err != nil {
		t.Fatalf("dashboard and Kueue never agreed on the borrower using 3 GPUs (1 borrowed) with 4 pending: Kueue borrowed %d, rows %v", borrowed, rows)
	}
	if b["Allocated (GPUs)"] != "2" || b["Allocation utilization (%)"] != "150" {
		t.Errorf("borrower row: %v", b)
	}
	if l["Lent (GPUs)"] != "1" || l["In use by tasks (GPUs)"] != "0" {
		t.Errorf("lender row: %v", l)
	}

	// Delete asks first, listing the team's running and pending tasks.
	if code, body := webtest.Get(t, c.h, "/teams/borrower/delete"); code != 200 || !strings.Contains(body, "3 tasks</strong> will be stopped") ||
		!strings.Contains(body, "-too-big-") || !strings.Contains(body, "<td>Pending</td>") || !strings.Contains(body, "<td>Running</td>") {
		t.Errorf("delete confirmation does not list the 3 tasks with their states: %d", code)
	}

	tasks := c.csv(t, "/tasks?format=csv&table=tasks&state=all&team=borrower")
	states := map[string]string{}
	for _, r := range tasks {
		states[r["Task"]] = r["State"] + "/" + r["Borrowing"]
	}
	for name, want := range map[string]string{"fits": "Running", "borrows": "Running", "too-big": "Pending"} {
		found := false
		for task, st := range states {
			if strings.Contains(task, "-"+name+"-") {
				found = true
				if !strings.HasPrefix(st, want) {
					t.Errorf("task %s: %s, want %s", task, st, want)
				}
			}
		}
		if !found {
			t.Errorf("no task for job %s in %v", name, states)
		}
	}
}
