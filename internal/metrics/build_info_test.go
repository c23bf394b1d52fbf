package metrics

import (
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/openquota/console/internal/version"
)

func TestBuildInfoMetric(t *testing.T) {
	version.Version, version.Revision = "v1.2.0", "abc123"
	t.Cleanup(func() { version.Version, version.Revision = "", "" })
	families, err := NewConsole().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]string
	for _, f := range families {
		if f.GetName() != "quota_console_build_info" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{"value": "", "type": f.GetType().String()}
			if m.GetGauge().GetValue() == 1 {
				labels["value"] = "1"
			}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got = append(got, labels)
		}
	}
	want := []map[string]string{{"type": "GAUGE", "value": "1", "version": "v1.2.0", "revision": "abc123", "goversion": runtime.Version()}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("quota_console_build_info series (-want +got):\n%s", diff)
	}
}

// The task history's state and counters, as the recorder gives them when
// scraped.
func TestTaskHistoryMetrics(t *testing.T) {
	c := NewConsole()
	leading := false
	stats := TaskHistoryStats{Written: 7, Dropped: 1, WriteErrors: 2, Enabled: true}
	c.RegisterTaskHistory(func() bool { return leading }, func() TaskHistoryStats { return stats })
	want := func(leader, storeUp string) string {
		return `
# HELP quota_console_history_enabled 1 when the console was started with a task history store (--history-store sqlite or postgres), else 0.
# TYPE quota_console_history_enabled gauge
quota_console_history_enabled 1
# HELP quota_console_history_events_dropped_total Workload events the history recorder dropped (queue full, or refused by the store): recorded as gaps.
# TYPE quota_console_history_events_dropped_total counter
quota_console_history_events_dropped_total 1
# HELP quota_console_history_store_up 1 while this replica has its task history store open and, when it records, the store takes its writes; else 0 (off, not reachable, or refusing writes).
# TYPE quota_console_history_store_up gauge
quota_console_history_store_up ` + storeUp + `
# HELP quota_console_history_tasks_written_total Task records the history recorder wrote or changed.
# TYPE quota_console_history_tasks_written_total counter
quota_console_history_tasks_written_total 7
# HELP quota_console_history_write_errors_total Failed writes to the task history store (each retried).
# TYPE quota_console_history_write_errors_total counter
quota_console_history_write_errors_total 2
# HELP quota_console_leader 1 on the replica that holds the task history Lease and records, else 0.
# TYPE quota_console_leader gauge
quota_console_leader ` + leader + `
`
	}
	names := []string{"quota_console_history_enabled", "quota_console_history_events_dropped_total", "quota_console_history_store_up",
		"quota_console_history_tasks_written_total", "quota_console_history_write_errors_total", "quota_console_leader"}
	if err := testutil.GatherAndCompare(c.Registry, strings.NewReader(want("0", "0")), names...); err != nil {
		t.Errorf("store not open: %v", err)
	}
	leading, stats.StoreOpen = true, true
	if err := testutil.GatherAndCompare(c.Registry, strings.NewReader(want("1", "1")), names...); err != nil {
		t.Errorf("leading: %v", err)
	}
}
