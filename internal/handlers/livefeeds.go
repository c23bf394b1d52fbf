package handlers

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/openquota/console/internal/domain"
)

// Figures the live parts show that do not come from the read model arrive
// through feeds, each on its own schedule: every team's hardware GPU
// utilization from Prometheus, Kueue's queue positions from its
// visibility API, and the insights the rules find. A rendering reads what a feed holds; a feed asks its
// source only when its figures are older than its schedule, and the hub
// asks them on that schedule while anyone watches, pushing what changed.

const (
	// utilizationEvery is how often the teams' GPU utilization is asked
	// (Prometheus scrapes every few seconds; the figure is an average).
	utilizationEvery = 30 * time.Second
	// positionsEvery is how often Kueue's queue positions are asked again.
	positionsEvery = 15 * time.Second
	// positionsKept: queues no rendering asked about for this long are not
	// asked again on schedule.
	positionsKept = time.Minute
	// feedTick is how often the hub looks whether a feed is due: the
	// insights' cadence, the shortest schedule.
	feedTick = insightsCadence
)

// feedVersions tell which figures a rendering showed.
type feedVersions struct{ utilization, positions, insights uint64 }

// liveFeeds are the feeds of the live parts.
type liveFeeds struct {
	utilization *utilizationFeed
	positions   *positionsFeed
	// insights is nil without the rules (no read model or overview).
	insights *insightsFeed
}

func (f *liveFeeds) versions() feedVersions {
	return feedVersions{f.utilization.version(), f.positions.version(), f.insights.version()}
}

// refresh asks the feeds that are due; ok when a figure changed. snap
// names the teams of the queues whose positions changed.
func (f *liveFeeds) refresh(ctx context.Context, snap *domain.Snapshot) (c liveChange, ok bool) {
	c.utilization = f.utilization.refreshIfDue(ctx)
	c.positions = teamsOfQueues(snap, f.positions.refreshIfDue(ctx))
	c.insights = f.insights.refreshIfDue(ctx)
	return c, c.utilization || len(c.positions) > 0 || c.insights
}

// teamsOfQueues are the teams of the named ClusterQueues, as snap knows
// them; nil for none.
func teamsOfQueues(snap *domain.Snapshot, queues map[string]bool) map[string]bool {
	if len(queues) == 0 {
		return nil
	}
	teams := map[string]bool{}
	for _, u := range snap.Teams {
		if queues[u.ClusterQueue] {
			teams[u.Team] = true
		}
	}
	return teams
}

// utilizationFeed keeps the hardware utilization of the GPUs (and MIG
// partitions) pods hold, by namespace as dcgm-exporter names them, and
// reads it by team with a snapshot's namespaces (domain.NamespaceTeams): a
// team is its ClusterQueue, and its pods are in whichever namespaces feed
// it, whoever named them.
type utilizationFeed struct {
	source teamUtilization
	log    *slog.Logger

	mu   sync.Mutex
	util map[string]domain.Readings
	// partitions are the MIG partitions' activity, by namespace and profile.
	partitions map[string]map[string]domain.Readings
	// overIdleWindow is each GPU's utilization over domain.IdleWindow.
	overIdleWindow map[string][]float64
	note           string
	asked          time.Time
	// ver counts the changes the pages show; answers every change of the
	// figures, the idle window's too.
	ver, answers uint64
	// read are the figures by team as of read.answers and read.snap.
	read teamUtilizationRead
}

// teamUtilizationRead are the feed's figures read by team.
type teamUtilizationRead struct {
	snap       *domain.Snapshot
	answers    uint64
	util       map[string]float64
	over       map[string][]float64
	partitions map[string]map[string]float64
}

func (u *utilizationFeed) version() uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ver
}

// byTeamLocked are the figures read by team with snap's namespaces, read
// again when the figures or the snapshot changed.
func (u *utilizationFeed) byTeamLocked(snap *domain.Snapshot) teamUtilizationRead {
	if u.read.snap == snap && u.read.answers == u.answers && snap != nil {
		return u.read
	}
	var teams map[string]string
	if snap != nil {
		teams = domain.NamespaceTeams(snap.Teams)
	}
	u.read = teamUtilizationRead{snap: snap, answers: u.answers,
		util: domain.UtilizationByTeam(u.util, teams), over: domain.GPUReadingsByTeam(u.overIdleWindow, teams),
		partitions: domain.PartitionUtilizationByTeam(u.partitions, teams)}
	return u.read
}

// current is the teams' utilization and, without one, why; asked first
// when older than utilizationEvery.
func (u *utilizationFeed) current(ctx context.Context, snap *domain.Snapshot) (map[string]float64, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if time.Since(u.asked) >= utilizationEvery {
		u.askLocked(ctx)
	}
	return u.byTeamLocked(snap).util, u.note
}

// currentPartitions is the teams' MIG partitions' activity by team and
// profile, asked with current's figures.
func (u *utilizationFeed) currentPartitions(ctx context.Context, snap *domain.Snapshot) map[string]map[string]float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	if time.Since(u.asked) >= utilizationEvery {
		u.askLocked(ctx)
	}
	return u.byTeamLocked(snap).partitions
}

// latest is current without waiting for Prometheus: what was last asked
// (asked is false before the first answer), and a refresh in the
// background when one is due.
func (u *utilizationFeed) latest(snap *domain.Snapshot) (util map[string]float64, note string, asked bool) {
	u.mu.Lock()
	util, note, asked = u.byTeamLocked(snap).util, u.note, !u.asked.IsZero()
	due := time.Since(u.asked) >= utilizationEvery
	u.mu.Unlock()
	if due {
		go u.refreshIfDue(context.Background())
	}
	return util, note, asked
}

// latestOverIdleWindow is the utilization of each GPU the teams hold over
// domain.IdleWindow as last asked (nil before an answer), without waiting
// for Prometheus.
func (u *utilizationFeed) latestOverIdleWindow(snap *domain.Snapshot) map[string][]float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byTeamLocked(snap).over
}

// latestPartitions is the teams' MIG partitions' activity as last asked,
// without waiting for Prometheus.
func (u *utilizationFeed) latestPartitions(snap *domain.Snapshot) map[string]map[string]float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byTeamLocked(snap).partitions
}

func (u *utilizationFeed) refreshIfDue(ctx context.Context) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if time.Since(u.asked) < utilizationEvery {
		return false
	}
	return u.askLocked(ctx)
}

// askLocked asks Prometheus; true when the figures changed.
func (u *utilizationFeed) askLocked(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	util, err := u.source.NamespaceGPUUtilization(ctx)
	// The partitions' and the hour's figures fail on their own: without
	// them the pages and the idle rule use the GPUs' current figures.
	var partitions map[string]map[string]domain.Readings
	var over map[string][]float64
	if err == nil {
		var perr, oerr error
		if partitions, perr = u.source.NamespacePartitionUtilization(ctx); perr != nil {
			u.log.Debug("prometheus: partitions' utilization", "err", perr)
		}
		if over, oerr = u.source.NamespaceGPUUtilizationOver(ctx, domain.IdleWindow); oerr != nil {
			u.log.Debug("prometheus: utilization over the idle window", "err", oerr)
		}
	}
	note := ""
	switch {
	case errors.Is(err, errNoPrometheus):
		note = "Hardware utilization needs Prometheus: start the console with --prometheus-url."
	case err != nil:
		u.log.Warn("prometheus", "err", err)
		note = "Prometheus is unavailable, so hardware utilization is not shown; everything else comes from Kubernetes."
	}
	u.asked = time.Now()
	if !maps.EqualFunc(over, u.overIdleWindow, slices.Equal) || (over == nil) != (u.overIdleWindow == nil) {
		// the insights read it; no page shows it, so no version for it
		u.overIdleWindow = over
		u.answers++
	}
	if note == u.note && maps.Equal(util, u.util) && samePartitionUse(partitions, u.partitions) && u.ver > 0 {
		return false
	}
	u.util, u.partitions, u.note = util, partitions, note
	u.ver++
	u.answers++
	return true
}

func samePartitionUse(a, b map[string]map[string]domain.Readings) bool {
	return maps.EqualFunc(a, b, func(x, y map[string]domain.Readings) bool { return maps.Equal(x, y) })
}

// positionsFeed keeps Kueue's queue positions of the ClusterQueues the
// pages show.
type positionsFeed struct {
	source QueuePositions // nil: none

	mu     sync.Mutex
	queues map[string]*askedPositions
	ver    uint64
}

type askedPositions struct {
	positions map[string]int
	ok        bool
	asked     time.Time
	used      time.Time
	// changed is the feed's version when they last changed.
	changed uint64
}

func (p *positionsFeed) version() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ver
}

// of is clusterQueue's positions by LocalQueue key; ok is false when Kueue
// did not answer (or there is no source). Asked first when older than
// positionsEvery.
func (p *positionsFeed) of(ctx context.Context, clusterQueue string) (map[string]int, bool) {
	if p.source == nil {
		return nil, false
	}
	p.mu.Lock()
	q := p.queues[clusterQueue]
	if q == nil {
		q = &askedPositions{}
		p.queues[clusterQueue] = q
	}
	q.used = time.Now()
	stale := time.Since(q.asked) >= positionsEvery
	p.mu.Unlock()
	if stale {
		p.ask(ctx, clusterQueue, q)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return q.positions, q.ok
}

// ask asks Kueue about one queue; true when its positions changed.
func (p *positionsFeed) ask(ctx context.Context, clusterQueue string, q *askedPositions) bool {
	positions, ok := p.source.Known(ctx, clusterQueue)
	p.mu.Lock()
	defer p.mu.Unlock()
	first := q.asked.IsZero()
	q.asked = time.Now()
	if !first && ok == q.ok && maps.Equal(positions, q.positions) {
		return false
	}
	q.positions, q.ok = positions, ok
	if !first {
		p.ver++
		q.changed = p.ver
	}
	return !first
}

// changedSince names the ClusterQueues whose positions changed after the
// feed's version v. A queue no rendering asked about for positionsKept is
// forgotten, its changes with it: a view that showed it that long ago
// shows it again anyway, with the clock's figures (domain.ClockCadence).
func (p *positionsFeed) changedSince(v uint64) map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	var changed map[string]bool
	for cq, q := range p.queues {
		if q.changed > v {
			if changed == nil {
				changed = map[string]bool{}
			}
			changed[cq] = true
		}
	}
	return changed
}

// refreshIfDue asks again about the queues renderings used lately whose
// positions are due, and forgets the others; it names those that changed.
func (p *positionsFeed) refreshIfDue(ctx context.Context) map[string]bool {
	if p.source == nil {
		return nil
	}
	p.mu.Lock()
	due := map[string]*askedPositions{}
	for cq, q := range p.queues {
		switch {
		case time.Since(q.used) > positionsKept:
			delete(p.queues, cq)
		case time.Since(q.asked) >= positionsEvery:
			due[cq] = q
		}
	}
	p.mu.Unlock()
	var changed map[string]bool
	for cq, q := range due {
		if ctx.Err() != nil {
			break
		}
		if p.ask(ctx, cq, q) {
			if changed == nil {
				changed = map[string]bool{}
			}
			changed[cq] = true
		}
	}
	return changed
}

// insightsFeed keeps the insights the rules found last, for the live
// views that list them: while such a view is watched the rules run every
// insightsCadence, so an insight shows within that of the rule finding it.
type insightsFeed struct {
	rules *insightRules

	evaluating sync.Mutex // one evaluation at a time

	mu        sync.Mutex
	latest    evaluatedInsights
	evaluated time.Time
	used      time.Time
	ver       uint64
	// told is the version the hub last heard of: a page's request may
	// have found the change (current), which the hub must push all the same.
	told uint64
}

func (f *insightsFeed) version() uint64 {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ver
}

// current is what the rules found last, evaluated first when there is
// nothing yet; a stale answer is refreshed in the background.
func (f *insightsFeed) current(ctx context.Context) evaluatedInsights {
	f.mu.Lock()
	first, stale := f.evaluated.IsZero(), time.Since(f.evaluated) >= insightsCadence
	f.mu.Unlock()
	switch {
	case first:
		f.evaluate(ctx)
	case stale:
		go f.evaluate(context.WithoutCancel(ctx))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.latest
}

// watched notes that a page showing the insights' list is open: the hub
// runs the rules on schedule for it.
func (f *insightsFeed) watched() {
	f.mu.Lock()
	f.used = time.Now()
	f.mu.Unlock()
}

// refreshIfDue runs the rules again when a view showed the insights
// lately and they are older than insightsCadence; true when what they
// find changed since the hub last asked, whoever ran them.
func (f *insightsFeed) refreshIfDue(ctx context.Context) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	due := time.Since(f.used) <= positionsKept && time.Since(f.evaluated) >= insightsCadence
	f.mu.Unlock()
	if due {
		f.evaluate(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := f.ver != f.told
	f.told = f.ver
	return changed
}

// evaluate runs the rules, unless they ran within insightsCadence.
func (f *insightsFeed) evaluate(ctx context.Context) {
	f.evaluating.Lock()
	defer f.evaluating.Unlock()
	f.mu.Lock()
	fresh := !f.evaluated.IsZero() && time.Since(f.evaluated) < insightsCadence
	f.mu.Unlock()
	if fresh { // evaluated while this one waited
		return
	}
	e := f.rules.evaluate(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evaluated = time.Now()
	same := f.ver > 0 && slices.EqualFunc(e.found, f.latest.found, domain.Insight.Same)
	f.latest = e // the headline's figures move without the list
	if !same {
		f.ver++
	}
}
