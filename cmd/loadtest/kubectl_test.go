package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestClassTableCountsAndWaitsAsKueueDefinesThem(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// Creation at 11:00; conditions as `kubectl get workloads -o json` prints them.
	list := `{"apiVersion":"v1","items":[
	 {"metadata":{"creationTimestamp":"2026-01-01T11:00:00Z"},"spec":{"priorityClassRef":{"name":"inference"}},
	  "status":{"conditions":[{"type":"QuotaReserved","status":"True","lastTransitionTime":"2026-01-01T11:10:00Z"},
	                          {"type":"Admitted","status":"True","lastTransitionTime":"2026-01-01T11:10:00Z"}]}},
	 {"metadata":{"creationTimestamp":"2026-01-01T11:00:00Z"},"spec":{"priorityClassRef":{"name":"inference"}},
	  "status":{"conditions":[{"type":"QuotaReserved","status":"False","lastTransitionTime":"2026-01-01T11:00:01Z"}]}},
	 {"metadata":{"creationTimestamp":"2026-01-01T11:00:00Z"},"spec":{"priorityClassRef":{"name":"inference"}},
	  "status":{"conditions":[{"type":"Admitted","status":"False","lastTransitionTime":"2026-01-01T11:40:00Z"},
	                          {"type":"Preempted","status":"True","lastTransitionTime":"2026-01-01T11:40:00Z"},
	                          {"type":"Requeued","status":"True","lastTransitionTime":"2026-01-01T11:45:00Z"}]}},
	 {"metadata":{"creationTimestamp":"2026-01-01T10:00:00Z"},"spec":{"priorityClassRef":{"name":"inference"}},
	  "status":{"conditions":[{"type":"Admitted","status":"True","lastTransitionTime":"2026-01-01T10:05:00Z"},
	                          {"type":"Finished","status":"True","lastTransitionTime":"2026-01-01T10:30:00Z"}]}},
	 {"metadata":{"creationTimestamp":"2026-01-01T11:30:00Z"},"spec":{"priorityClassName":"batch"},"status":{}},
	 {"metadata":{"creationTimestamp":"2026-01-01T11:59:00Z"},"spec":{}}
	],"kind":"List"}`
	var wl workloadList
	if err := json.NewDecoder(strings.NewReader(list)).Decode(&wl); err != nil {
		t.Fatal(err)
	}
	want := []classTotal{
		{Class: noClass, Pending: 1, AvgWaitSeconds: 60, LongestWaitSeconds: 60},
		{Class: "batch", Pending: 1, AvgWaitSeconds: 1800, LongestWaitSeconds: 1800},
		// waits: 10 min (admitted), 60 min (pending), 15 min (since the requeue); the finished one is left out
		{Class: "inference", Running: 1, Pending: 1, Preempted: 1, AvgWaitSeconds: (600 + 3600 + 900) / 3, LongestWaitSeconds: 3600},
	}
	if diff := cmp.Diff(want, classTable(&wl, now)); diff != "" {
		t.Errorf("classTable (-want +got):\n%s", diff)
	}
}
