package taskhistory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/openquota/console/internal/domain"
)

// TaskRef names a recorded task. Fields are empty when the task is not
// recorded (a preemptor the recorder never saw).
type TaskRef struct {
	UID, Namespace, Name, Team, Class string
	// OwnerKind and OwnerName name the Workload's owner (Task's); empty
	// for a Workload without one.
	OwnerKind, OwnerName string
}

// Named is the task's name as people know it.
func (r TaskRef) Named() domain.TaskName {
	return domain.TaskName{Namespace: r.Namespace, Workload: r.Name, OwnerKind: r.OwnerKind, OwnerName: r.OwnerName}
}

// Preemption is one preemption of a task.
type Preemption struct {
	At   time.Time
	Task TaskRef
	// GPUs is what the preempted admission held; ClusterQueue is where.
	GPUs         int64
	ClusterQueue string
	// Preemptor is the task that caused it; its Team falls back to the team
	// of PreemptorClusterQueue when the task itself is not recorded.
	Preemptor             TaskRef
	PreemptorClusterQueue string
	// Reason is Kueue's (InClusterQueue, InCohortReclamation, ...),
	// ReasonWords the Tasks page's phrase, Message Kueue's message.
	Reason, ReasonWords, Message string
	// GPUHoursLost is the run since the admission it ended times that
	// admission's GPUs; LostKnown is false when that admission was not
	// recorded.
	GPUHoursLost float64
	LostKnown    bool
}

// PreemptionQuery selects preemptions. Empty Team or Class: any.
type PreemptionQuery struct {
	Window      Window
	Team, Class string
	// LowestClass is the class of tasks that name none, as on the Tasks
	// page: they show in it and a filter on it selects them.
	LowestClass string
	// Teams, when not nil, limits the preemptions to these teams' tasks (an
	// empty list selects none): what a member of a few teams may see.
	Teams []string
	// Limit is the page size (default 50, at most 1000); After is the Next
	// of the previous page.
	Limit int
	After string
}

// PreemptionPage is one page of preemptions, newest first.
type PreemptionPage struct {
	Preemptions []Preemption
	// Next continues after this page; empty on the last one.
	Next string
	// Total is how many preemptions match the query, on all pages.
	Total int64
	Gaps  []Period
}

const (
	defaultPageSize = 50
	maxPageSize     = 1000
)

// Preemptions returns a page of the preemptions in the query's window.
func (s *Store) Preemptions(ctx context.Context, pq PreemptionQuery) (*PreemptionPage, error) {
	fail := func(err error) (*PreemptionPage, error) {
		return nil, fmt.Errorf("task history store %s: preemptions: %w", s.name, err)
	}
	limit := pq.Limit
	if limit <= 0 {
		limit = defaultPageSize
	}
	limit = min(limit, maxPageSize)
	where := `p.at_ms >= ? AND p.at_ms < ?`
	args := []any{ceilMS(pq.Window.From), ceilMS(pq.Window.To)}
	if pq.Team != "" {
		where += ` AND p.team = ?`
		args = append(args, pq.Team)
	}
	switch {
	case pq.Class != "" && pq.Class == pq.LowestClass:
		where += ` AND (p.class = ? OR p.class = '')`
		args = append(args, pq.Class)
	case pq.Class != "":
		where += ` AND p.class = ?`
		args = append(args, pq.Class)
	}
	if pq.Teams != nil {
		in, teamArgs := inList(pq.Teams)
		where += ` AND p.team` + in
		args = append(args, teamArgs...)
	}
	page := &PreemptionPage{}
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM preemptions p WHERE `+where), args...).Scan(&page.Total); err != nil {
		return fail(err)
	}
	if pq.After != "" {
		at, uid, err := parseCursor(pq.After)
		if err != nil {
			return fail(err)
		}
		where += ` AND (p.at_ms < ? OR (p.at_ms = ? AND p.uid > ?))`
		args = append(args, at, at, uid)
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT p.uid, p.at_ms, COALESCE(t.namespace, ''), COALESCE(t.name, ''), p.team, p.class,
		COALESCE(t.owner_kind, ''), COALESCE(t.owner_name, ''),
		p.gpus, p.cluster_queue, p.lost_gpu_ms, p.reason, p.reason_words, p.message,
		p.preemptor_uid, p.preemptor_cluster_queue, COALESCE(pt.namespace, ''), COALESCE(pt.name, ''),
		COALESCE(pt.team, q.team, ''), COALESCE(pt.class, ''), COALESCE(pt.owner_kind, ''), COALESCE(pt.owner_name, '')
		FROM preemptions p
		LEFT JOIN tasks t ON t.uid = p.uid
		LEFT JOIN tasks pt ON pt.uid = p.preemptor_uid
		LEFT JOIN queues q ON q.cluster_queue = p.preemptor_cluster_queue
		WHERE `+where+` ORDER BY p.at_ms DESC, p.uid LIMIT ?`), append(args, limit+1)...)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	for rows.Next() {
		var p Preemption
		var at int64
		var lost sql.NullInt64
		if err := rows.Scan(&p.Task.UID, &at, &p.Task.Namespace, &p.Task.Name, &p.Task.Team, &p.Task.Class,
			&p.Task.OwnerKind, &p.Task.OwnerName,
			&p.GPUs, &p.ClusterQueue, &lost, &p.Reason, &p.ReasonWords, &p.Message,
			&p.Preemptor.UID, &p.PreemptorClusterQueue, &p.Preemptor.Namespace, &p.Preemptor.Name,
			&p.Preemptor.Team, &p.Preemptor.Class, &p.Preemptor.OwnerKind, &p.Preemptor.OwnerName); err != nil {
			return fail(err)
		}
		p.At = fromMS(at)
		if p.Task.Class == "" {
			p.Task.Class = pq.LowestClass
		}
		if p.Preemptor.Class == "" && p.Preemptor.Name != "" { // a recorded task: it named no class
			p.Preemptor.Class = pq.LowestClass
		}
		if lost.Valid {
			p.GPUHoursLost, p.LostKnown = gpuHours(lost.Int64), true
		}
		if len(page.Preemptions) == limit {
			last := page.Preemptions[limit-1]
			page.Next = cursor(ms(last.At), last.Task.UID)
			break
		}
		page.Preemptions = append(page.Preemptions, p)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if page.Gaps, err = s.gaps(ctx, s.db, pq.Window, s.clock()); err != nil {
		return fail(err)
	}
	return page, nil
}

// PreemptedBy is how often one team's tasks were preempted by another's.
type PreemptedBy struct {
	// Team was preempted by PreemptorTeam (empty: not known).
	Team, PreemptorTeam string
	Count               int64
	// GPUHoursLost sums the known losses.
	GPUHoursLost float64
}

// PreemptionsByTeam counts the preemptions in w per preempted team and
// preemptor team: of team's tasks only, or of all teams' when team is empty.
func (s *Store) PreemptionsByTeam(ctx context.Context, w Window, team string) ([]PreemptedBy, []Period, error) {
	fail := func(err error) ([]PreemptedBy, []Period, error) {
		return nil, nil, fmt.Errorf("task history store %s: preemptions by team: %w", s.name, err)
	}
	where := `p.at_ms >= ? AND p.at_ms < ?`
	args := []any{ceilMS(w.From), ceilMS(w.To)}
	if team != "" {
		where += ` AND p.team = ?`
		args = append(args, team)
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT p.team, COALESCE(pt.team, q.team, ''), COUNT(*), CAST(COALESCE(SUM(p.lost_gpu_ms), 0) AS BIGINT)
		FROM preemptions p
		LEFT JOIN tasks pt ON pt.uid = p.preemptor_uid
		LEFT JOIN queues q ON q.cluster_queue = p.preemptor_cluster_queue
		WHERE `+where+` GROUP BY 1, 2 ORDER BY 1, 3 DESC, 2`), args...)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	var out []PreemptedBy
	for rows.Next() {
		var b PreemptedBy
		var lost int64
		if err := rows.Scan(&b.Team, &b.PreemptorTeam, &b.Count, &lost); err != nil {
			return fail(err)
		}
		b.GPUHoursLost = gpuHours(lost)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	gaps, err := s.gaps(ctx, s.db, w, s.clock())
	if err != nil {
		return fail(err)
	}
	return out, gaps, nil
}

func gpuHours(gpuMS int64) float64 { return float64(gpuMS) / float64(time.Hour/time.Millisecond) }

// A cursor is "<unix ms>.<uid>" of the last row of a page.
func cursor(at int64, uid string) string { return strconv.FormatInt(at, 10) + "." + uid }

// ValidPreemptionCursor reports whether c is a page cursor of the
// preemptions (a Next), so that a link edited by hand can show the first
// page instead of an error.
func ValidPreemptionCursor(c string) bool {
	_, _, err := parseCursor(c)
	return err == nil
}

func parseCursor(c string) (int64, string, error) {
	a, uid, ok := strings.Cut(c, ".")
	at, err := strconv.ParseInt(a, 10, 64)
	if !ok || err != nil {
		return 0, "", errors.New("not a page cursor: " + strconv.Quote(c))
	}
	return at, uid, nil
}
