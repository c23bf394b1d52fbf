package metrics

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/prometheus/common/model"

	"github.com/openquota/console/internal/domain"
)

// DefaultReportStep is the resolution of the usage report: each sample of
// a range query stands for this much time.
const DefaultReportStep = 5 * time.Minute

// maxReportDays bounds one usage report.
const maxReportDays = 400

// maxPointsPerQuery stays below Prometheus' limit of 11,000 points per
// series in one range query; longer reports are queried in chunks.
const maxPointsPerQuery = 10000

// UsageRow is one team's GPU-hours on one UTC day.
type UsageRow struct {
	Day  time.Time // 00:00 UTC
	Team string
	// GPUHoursAllocated is the nominal GPU quota, summed over flavors, times time.
	GPUHoursAllocated float64
	// GPUHoursUsed is the GPUs held by the team's admitted workloads, borrowed ones included.
	GPUHoursUsed float64
	// GPUHoursBorrowed is the use beyond nominal quota, per flavor.
	GPUHoursBorrowed float64
	// GPUHoursLent is the team's idle quota that other ClusterQueues of its
	// cohort used: at each step the cohort's borrowed GPUs of a flavor are
	// split among its queues in proportion to their lendable idle quota.
	GPUHoursLent float64
	// AvgHardwareUtil is the hardware utilization (0-100) averaged over the
	// GPU-time the team's pods held GPUs; HardwareUtilKnown is false when
	// they held none that day (or the GPU exporter was not scraped).
	AvgHardwareUtil   float64
	HardwareUtilKnown bool
}

// Report is the usage report: its rows, and the periods Prometheus has no
// sample of Kueue's gauges for (Prometheus or Kueue down, scrapes lost),
// whose GPU-hours count as zero in the rows.
type Report struct {
	Rows []UsageRow
	Gaps []Gap
}

// Gap is a period without samples, [From, To).
type Gap struct{ From, To time.Time }

// gapsOf are the steps of the grid start, start+step, … ≤ end at which no
// queue has a sample, after the first that has one (before it the queues
// may not have existed yet), merged into periods.
func gapsOf(queues []queueSample, start, end time.Time, step time.Duration) []Gap {
	sampled := map[int64]bool{}
	first := time.Time{}
	for _, q := range queues {
		sampled[q.T.UnixNano()] = true
		if first.IsZero() || q.T.Before(first) {
			first = q.T
		}
	}
	if first.IsZero() {
		return nil
	}
	var out []Gap
	for t := start; !t.After(end); t = t.Add(step) {
		if t.Before(first) || sampled[t.UnixNano()] {
			continue
		}
		if n := len(out); n > 0 && out[n-1].To.Equal(t) {
			out[n-1].To = t.Add(step)
		} else {
			out = append(out, Gap{From: t, To: t.Add(step)})
		}
	}
	return out
}

// queueGPUByFlavorQuery is a Kueue GPU gauge of every ClusterQueue by flavor
// (all queues, not only the console's teams: any queue of a cohort can
// borrow a team's idle quota).
func queueGPUByFlavorQuery(metric string) string {
	return "sum by (cluster_queue, cohort, flavor) (" + kueueGPUSelector(metric, "") + ")"
}

// metricLendingLimit is how much of a queue's nominal quota others may use
// (+Inf without limit, 0 for a team that does not lend).
const metricLendingLimit = "kueue_cluster_queue_lending_limit"

// utilSumQuery and utilCountQuery are the sum and count of the held GPUs'
// utilization by namespace: sum/count over a day is the GPU-time-weighted
// average.
var utilSumQuery, utilCountQuery = readingsQueries(heldGPUUtil, "namespace")

// UsageReport returns every team's GPU-hours for each UTC day from from to
// to (both dates inclusive; their time of day is ignored), sorted by day and
// team. It samples Kueue's and the GPU exporter's gauges every ReportStep
// (up to now for today) and counts each sample for one step; a team has a
// row for each day its ClusterQueue existed. The GPUs' utilization counts
// for the team of their pods' namespace (namespaces: domain.NamespaceTeams
// as the cluster is now; a namespace no queue is fed from now, by the
// settings' team namespaces).
func (p *Prom) UsageReport(ctx context.Context, s domain.Settings, namespaces map[string]string, from, to time.Time) (Report, error) {
	if err := p.available(); err != nil {
		return Report{}, err
	}
	first, last := utcDay(from), utcDay(to)
	if last.Before(first) {
		return Report{}, fmt.Errorf("usage report: %s is before %s", last.Format(time.DateOnly), first.Format(time.DateOnly))
	}
	if days := int(last.Sub(first)/(24*time.Hour)) + 1; days > maxReportDays {
		return Report{}, fmt.Errorf("usage report: %d days, at most %d", days, maxReportDays)
	}
	step := p.ReportStep
	if step <= 0 {
		step = DefaultReportStep
	}
	end := last.Add(24*time.Hour - step)
	if now := time.Now(); end.After(now) {
		end = now
	}
	var queues []queueSample
	var util []utilSample
	for _, r := range chunks(first, end, step, maxPointsPerQuery) {
		var nominal, usage, lending, utilSum, utilCount model.Matrix
		query := func(dst *model.Matrix, q string) func() error {
			return func() (err error) {
				*dst, err = p.matrix(ctx, q, r)
				return err
			}
		}
		if err := all(
			query(&nominal, queueGPUByFlavorQuery(metricNominalQuota)),
			query(&usage, queueGPUByFlavorQuery(metricResourceUsage)),
			query(&lending, queueGPUByFlavorQuery(metricLendingLimit)),
			query(&utilSum, utilSumQuery),
			query(&utilCount, utilCountQuery),
		); err != nil {
			return Report{}, fmt.Errorf("usage report: %w", err)
		}
		queues = append(queues, queueSamples(nominal, usage, lending)...)
		util = append(util, utilSamples(utilSum, utilCount)...)
	}
	return Report{Rows: buildReport(s, namespaces, step, queues, util), Gaps: gapsOf(queues, first, end, step)}, nil
}

// utcDay is t's date as 00:00 UTC.
func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// chunks splits the samples start, start+step, … ≤ end into ranges of at
// most maxPoints samples each, no sample in two.
func chunks(start, end time.Time, step time.Duration, maxPoints int) []Range {
	var out []Range
	for s := start; !s.After(end); {
		e := s.Add(time.Duration(maxPoints-1) * step)
		if e.After(end) {
			e = end
		}
		out = append(out, Range{Start: s, End: e, Step: step})
		// The next chunk starts at the first sample after e on the grid.
		s = s.Add((e.Sub(s)/step + 1) * step)
	}
	return out
}

// queueSample is one ClusterQueue's GPUs of one flavor at one instant.
type queueSample struct {
	T                            time.Time
	ClusterQueue, Cohort, Flavor string
	Nominal, Used                float64
	// LendingLimit is +Inf when the queue lends without limit.
	LendingLimit float64
}

type sampleKey struct {
	t                  int64
	clusterQueue, flav string
}

// queueSamples joins the nominal quota, usage and lending limit matrices
// (each by cluster_queue, cohort, flavor) per queue, flavor and instant.
func queueSamples(nominal, usage, lending model.Matrix) []queueSample {
	byKey := map[sampleKey]*queueSample{}
	var order []sampleKey
	get := func(m model.Metric, t model.Time) *queueSample {
		k := sampleKey{int64(t), string(m["cluster_queue"]), string(m["flavor"])}
		qs, ok := byKey[k]
		if !ok {
			qs = &queueSample{T: t.Time().UTC(), ClusterQueue: k.clusterQueue, Cohort: string(m["cohort"]), Flavor: k.flav, LendingLimit: math.Inf(1)}
			byKey[k] = qs
			order = append(order, k)
		}
		return qs
	}
	for _, ss := range nominal {
		for _, v := range ss.Values {
			get(ss.Metric, v.Timestamp).Nominal = float64(v.Value)
		}
	}
	for _, ss := range usage {
		for _, v := range ss.Values {
			get(ss.Metric, v.Timestamp).Used = float64(v.Value)
		}
	}
	for _, ss := range lending {
		for _, v := range ss.Values {
			// Only where the queue has a quota or a use: a limit alone is no sample.
			k := sampleKey{int64(v.Timestamp), string(ss.Metric["cluster_queue"]), string(ss.Metric["flavor"])}
			if qs, ok := byKey[k]; ok {
				qs.LendingLimit = float64(v.Value)
			}
		}
	}
	out := make([]queueSample, len(order))
	for i, k := range order {
		out[i] = *byKey[k]
	}
	return out
}

// utilSample is the sum and count of per-GPU utilization of one namespace's GPUs at one instant.
type utilSample struct {
	T          time.Time
	Namespace  string
	Sum, Count float64
}

// utilSamples joins the sum and count matrices (each by namespace).
func utilSamples(sum, count model.Matrix) []utilSample {
	type key struct {
		t  int64
		ns string
	}
	counts := map[key]float64{}
	for _, ss := range count {
		for _, v := range ss.Values {
			counts[key{int64(v.Timestamp), string(ss.Metric["namespace"])}] = float64(v.Value)
		}
	}
	var out []utilSample
	for _, ss := range sum {
		ns := string(ss.Metric["namespace"])
		for _, v := range ss.Values {
			c, ok := counts[key{int64(v.Timestamp), ns}]
			if !ok || c == 0 || math.IsNaN(float64(v.Value)) {
				continue
			}
			out = append(out, utilSample{T: v.Timestamp.Time().UTC(), Namespace: ns, Sum: float64(v.Value), Count: c})
		}
	}
	return out
}

// buildReport integrates samples taken every step into GPU-hours per UTC
// day and team: each sample counts for value × step.
func buildReport(s domain.Settings, namespaces map[string]string, step time.Duration, queues []queueSample, util []utilSample) []UsageRow {
	hours := step.Hours()
	type rowKey struct {
		day  time.Time
		team string
	}
	rows := map[rowKey]*UsageRow{}

	// Lending is shared within a cohort, flavor and instant.
	type groupKey struct {
		t              time.Time
		cohort, flavor string
	}
	groups := map[groupKey][]int{}
	var groupOrder []groupKey
	for i, q := range queues {
		cohort := q.Cohort
		if cohort == "" { // a queue without cohort neither lends nor borrows
			cohort = "\x00" + q.ClusterQueue
		}
		k := groupKey{q.T, cohort, q.Flavor}
		if _, ok := groups[k]; !ok {
			groupOrder = append(groupOrder, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, k := range groupOrder {
		idx := groups[k]
		uses := make([]domain.QuotaUse, len(idx))
		for j, i := range idx {
			uses[j] = domain.QuotaUse{Nominal: queues[i].Nominal, Used: queues[i].Used, LendingLimit: queues[i].LendingLimit}
		}
		lent := domain.LentShares(uses)
		for j, i := range idx {
			q := queues[i]
			team := s.TeamOfQueueName(q.ClusterQueue)
			rk := rowKey{utcDay(q.T), team}
			row := rows[rk]
			if row == nil {
				row = &UsageRow{Day: rk.day, Team: team}
				rows[rk] = row
			}
			row.GPUHoursAllocated += q.Nominal * hours
			row.GPUHoursUsed += q.Used * hours
			row.GPUHoursBorrowed += math.Max(q.Used-q.Nominal, 0) * hours
			row.GPUHoursLent += lent[j] * hours
		}
	}

	type utilAcc struct{ sum, count float64 }
	utilBy := map[rowKey]utilAcc{}
	teamOf := func(ns string) (string, bool) {
		if team, known := namespaces[ns]; known {
			return team, team != ""
		}
		return s.TeamOfNamespace(ns)
	}
	for _, u := range util {
		if team, ok := teamOf(u.Namespace); ok {
			rk := rowKey{utcDay(u.T), team}
			utilBy[rk] = utilAcc{utilBy[rk].sum + u.Sum, utilBy[rk].count + u.Count}
		}
	}

	out := make([]UsageRow, 0, len(rows))
	for rk, row := range rows {
		if a := utilBy[rk]; a.count > 0 {
			row.AvgHardwareUtil = a.sum / a.count
			row.HardwareUtilKnown = true
		}
		out = append(out, *row)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Day.Equal(out[j].Day) {
			return out[i].Day.Before(out[j].Day)
		}
		return out[i].Team < out[j].Team
	})
	return out
}
