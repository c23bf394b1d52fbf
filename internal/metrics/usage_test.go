package metrics

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/common/model"

	"github.com/openquota/console/internal/domain"
)

var inf = math.Inf(1)

func TestChunksCoverEverySampleOnce(t *testing.T) {
	start := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	step := 5 * time.Minute
	for _, tc := range []struct {
		end       time.Time
		maxPoints int
		want      []Range
	}{
		{start, 10, []Range{{start, start, step}}},
		{start.Add(3*step + time.Minute), 10, []Range{{start, start.Add(3*step + time.Minute), step}}},
		{start.Add(25 * step), 10, []Range{
			{start, start.Add(9 * step), step},
			{start.Add(10 * step), start.Add(19 * step), step},
			{start.Add(20 * step), start.Add(25 * step), step},
		}},
		{start.Add(-time.Second), 10, nil},
	} {
		got := chunks(start, tc.end, step, tc.maxPoints)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("chunks to %s (-want +got):\n%s", tc.end, diff)
		}
	}
}

func TestQueueSamplesJoinsMatrices(t *testing.T) {
	t0 := model.TimeFromUnix(1782864000) // 2026-07-01 00:00 UTC
	t1 := t0.Add(5 * time.Minute)
	m := func(cq string) model.Metric {
		return model.Metric{"cluster_queue": model.LabelValue(cq), "cohort": "pool", "flavor": "p5"}
	}
	nominal := model.Matrix{
		{Metric: m("a"), Values: []model.SamplePair{{Timestamp: t0, Value: 8}, {Timestamp: t1, Value: 8}}},
		{Metric: m("b"), Values: []model.SamplePair{{Timestamp: t1, Value: 2}}},
	}
	usage := model.Matrix{
		{Metric: m("a"), Values: []model.SamplePair{{Timestamp: t1, Value: 3}}},
		{Metric: m("b"), Values: []model.SamplePair{{Timestamp: t1, Value: 4}}},
	}
	lending := model.Matrix{
		{Metric: m("a"), Values: []model.SamplePair{{Timestamp: t1, Value: 6}}},
		{Metric: m("c"), Values: []model.SamplePair{{Timestamp: t1, Value: 1}}}, // no quota: no sample
	}
	want := []queueSample{
		{T: t0.Time().UTC(), ClusterQueue: "a", Cohort: "pool", Flavor: "p5", Nominal: 8, LendingLimit: inf},
		{T: t1.Time().UTC(), ClusterQueue: "a", Cohort: "pool", Flavor: "p5", Nominal: 8, Used: 3, LendingLimit: 6},
		{T: t1.Time().UTC(), ClusterQueue: "b", Cohort: "pool", Flavor: "p5", Nominal: 2, Used: 4, LendingLimit: inf},
	}
	if diff := cmp.Diff(want, queueSamples(nominal, usage, lending)); diff != "" {
		t.Errorf("queueSamples (-want +got):\n%s", diff)
	}

	sum := model.Matrix{{Metric: model.Metric{"namespace": "ns-a"}, Values: []model.SamplePair{{Timestamp: t0, Value: 150}, {Timestamp: t1, Value: 90}}}}
	count := model.Matrix{{Metric: model.Metric{"namespace": "ns-a"}, Values: []model.SamplePair{{Timestamp: t0, Value: 2}}}}
	wantUtil := []utilSample{{T: t0.Time().UTC(), Namespace: "ns-a", Sum: 150, Count: 2}}
	if diff := cmp.Diff(wantUtil, utilSamples(sum, count)); diff != "" {
		t.Errorf("utilSamples (-want +got):\n%s", diff)
	}
}

// Samples taken every hour around a UTC midnight: each counts for one hour
// of its own UTC day.
func TestBuildReportIntegratesPerUTCDay(t *testing.T) {
	s := domain.Settings{NamespacePrefix: "ns-"}
	day1 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	day2 := day1.Add(24 * time.Hour)
	at := func(h int) time.Time { return day2.Add(time.Duration(h) * time.Hour) }
	q := func(tm time.Time, cq, flavor string, nominal, used float64) queueSample {
		return queueSample{T: tm, ClusterQueue: cq, Cohort: "pool", Flavor: flavor, Nominal: nominal, Used: used, LendingLimit: inf}
	}
	var queues []queueSample
	// 22:00 and 23:00 on day 1: a idle (8 GPUs), b uses 6 of its 4 (borrows 2).
	for _, h := range []int{-2, -1} {
		queues = append(queues, q(at(h), "ns-a-clusterqueue", "p5", 8, 0), q(at(h), "ns-b-clusterqueue", "p5", 4, 6))
	}
	// 00:00 on day 2: b also borrows on g6, where only a team outside the
	// console ("other-queue") has idle quota; a lends 2 on p5 as before. The
	// queue outside the console is a row of its own, named after it.
	queues = append(queues,
		q(at(0), "ns-a-clusterqueue", "p5", 8, 0), q(at(0), "ns-b-clusterqueue", "p5", 4, 6),
		q(at(0), "ns-b-clusterqueue", "g6", 0, 1), q(at(0), "other-queue", "g6", 4, 0),
	)
	util := []utilSample{
		{T: at(-1), Namespace: "ns-b", Sum: 6 * 90, Count: 6},
		{T: at(0), Namespace: "ns-b", Sum: 4 * 50, Count: 4},
		{T: at(0), Namespace: "ns-b", Sum: 3 * 100, Count: 3}, // a second chunk's sample adds up
		{T: at(0), Namespace: "ns-z", Sum: 10, Count: 1},      // no ClusterQueue: no row
		// The queue outside the console serves "default"; "shared" feeds
		// two teams' queues, so its GPUs count for neither.
		{T: at(0), Namespace: "default", Sum: 20, Count: 1},
		{T: at(0), Namespace: "shared", Sum: 100, Count: 1},
		{T: at(0), Namespace: "ns-a", Sum: 0, Count: 0},
	}
	namespaces := map[string]string{"default": "other-queue", "shared": "", "ns-a": "a"}
	want := []UsageRow{
		{Day: day1, Team: "a", GPUHoursAllocated: 16, GPUHoursLent: 4},
		{Day: day1, Team: "b", GPUHoursAllocated: 8, GPUHoursUsed: 12, GPUHoursBorrowed: 4, AvgHardwareUtil: 90, HardwareUtilKnown: true},
		{Day: day2, Team: "a", GPUHoursAllocated: 8, GPUHoursLent: 2},
		{Day: day2, Team: "b", GPUHoursAllocated: 4, GPUHoursUsed: 7, GPUHoursBorrowed: 3, AvgHardwareUtil: 500.0 / 7, HardwareUtilKnown: true},
		{Day: day2, Team: "other-queue", GPUHoursAllocated: 4, GPUHoursLent: 1, AvgHardwareUtil: 20, HardwareUtilKnown: true},
	}
	got := buildReport(s, namespaces, time.Hour, queues, util)
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	// Half-hour steps count half.
	got = buildReport(s, nil, 30*time.Minute, queues[:2], nil)
	if len(got) != 2 || got[0].GPUHoursAllocated != 4 || got[1].GPUHoursBorrowed != 1 {
		t.Errorf("30-minute step: %+v", got)
	}
}

func TestUTCDay(t *testing.T) {
	ist := time.FixedZone("IST", 5*3600+1800)
	got := utcDay(time.Date(2026, 7, 2, 3, 0, 0, 0, ist)) // 2026-07-01 21:30 UTC
	if want := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("utcDay = %v, want %v", got, want)
	}
}

// Steps at which Prometheus has no sample of any queue, after the first
// that has one, are the report's gaps, merged into periods.
func TestGapsOf(t *testing.T) {
	start := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	step := 5 * time.Minute
	at := func(i int) time.Time { return start.Add(time.Duration(i) * step) }
	var queues []queueSample
	for _, i := range []int{2, 3, 4, 7, 10, 11} { // none before 2 (no queue yet), none at 5-6 and 8-9, 12
		queues = append(queues, queueSample{T: at(i), ClusterQueue: "a"}, queueSample{T: at(i), ClusterQueue: "b"})
	}
	want := []Gap{{at(5), at(7)}, {at(8), at(10)}, {at(12), at(13)}}
	if diff := cmp.Diff(want, gapsOf(queues, start, at(12), step)); diff != "" {
		t.Errorf("gaps (-want +got):\n%s", diff)
	}
	if got := gapsOf(nil, start, at(12), step); got != nil {
		t.Errorf("no sample at all: %v, want no gap (no queue existed)", got)
	}
}
