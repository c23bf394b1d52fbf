package e2e

import (
	"strconv"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/openquota/console/sandbox"
)

// fleetRow is what the overview should show for one instance type.
// Capacity columns sum over every node of the type, ready or not.
type fleetRow struct {
	count, ready, notReady        int64
	gpus, vcpu, memoryGiB, neuron int64
}

func TestOverviewShowsSandboxFleet(t *testing.T) {
	env := sandboxEnv(t)
	base := startConsole(t, env)
	page := newPage(t)

	resp, err := page.Goto(base + "/")
	if err != nil {
		t.Fatalf("goto %s/: %v", base, err)
	}
	if !resp.Ok() {
		t.Fatalf("GET %s/: %d %s", base, resp.Status(), resp.StatusText())
	}

	// Expected figures come from the fleet the sandbox itself created, so the
	// test follows any change to the fleet.
	var types []string
	want := map[string]*fleetRow{}
	for _, n := range sandbox.Fleet() {
		r, ok := want[n.Shape.Type]
		if !ok {
			r = &fleetRow{}
			want[n.Shape.Type] = r
			types = append(types, n.Shape.Type)
		}
		r.count++
		if n.NotReady {
			r.notReady++
		} else {
			r.ready++
		}
		r.gpus += n.WholeGPUs()
		r.vcpu += n.Shape.VCPU
		r.memoryGiB += n.Shape.MemoryGiB
		r.neuron += n.Shape.Neuron
	}

	expect := playwright.NewPlaywrightAssertions()
	table := page.Locator("table#instance-types")
	if err := expect.Locator(table).ToBeVisible(); err != nil {
		t.Fatalf("instance types table: %v", err) // newPage screenshots failures
	}
	for _, typ := range types {
		w := want[typ]
		row := table.Locator(`tr[data-instance-type="` + typ + `"]`)
		if err := expect.Locator(row).ToBeVisible(); err != nil {
			t.Errorf("row for %s: %v", typ, err)
			continue
		}
		for _, c := range []struct {
			col  string
			want int64
		}{
			{"count", w.count},
			{"ready", w.ready},
			{"not-ready", w.notReady},
			{"gpus", w.gpus},
			{"vcpu", w.vcpu},
			{"memory-gib", w.memoryGiB},
			{"neuron", w.neuron},
		} {
			cell := row.Locator(`td[data-col="` + c.col + `"]`)
			// ToHaveText waits for the cell and matches its whole trimmed text.
			if err := expect.Locator(cell).ToHaveText(strconv.FormatInt(c.want, 10)); err != nil {
				t.Errorf("%s %s: %v", typ, c.col, err)
			}
		}
	}
	screenshot(t, page, "overview")
}
