package domain

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Revisions. Every change of a team or of the cluster policy through
// the Applier is recorded as a revision in a ConfigMap, in the cluster, so it
// survives console restarts and every console replica sees it. The
// ConfigMaps live in the console's own namespace (Settings.State), which
// only the console writes: a team's members, who may edit their own
// namespace, cannot plant or change revisions that an admin would then roll
// back to. The console records them with its own identity (Applier.Records)
// after the user's change went through, so "by" and "at" are the console's
// word.
//
//   - a team's revisions are the ConfigMap <clusterqueue-name>-history;
//     deleting the team deletes it;
//   - the policy's revisions are the ConfigMap <cohort>-policy-history.
//
// Each data key rev-000123 holds one revision as JSON. Only the newest
// RevisionLimit revisions are kept (fewer if they would not fit in a ConfigMap).
const (
	RevisionLimit = 50
	// RevisionsLabel marks the revisions ConfigMaps: "team" or "policy".
	RevisionsLabel = "quota-console.openquota.dev/history"

	teamRevisionsSuffix   = "-history"
	policyRevisionsSuffix = "-policy-history"
	revisionKeyPrefix     = "rev-"
	// ConfigMaps hold at most 1 MiB; keep room for metadata.
	maxRevisionsBytes = 900 << 10
)

// TeamRevisionsName is the ConfigMap holding a team's revisions, in Settings.State().
func TeamRevisionsName(s Settings, team string) string {
	return s.ClusterQueue(team) + teamRevisionsSuffix
}

// PolicyRevisionsName is the ConfigMap holding the policy's revisions, in Settings.State().
func PolicyRevisionsName(s Settings) string { return s.Cohort + policyRevisionsSuffix }

// Action is what a revision did.
type Action string

const (
	ActionCreate   Action = "create"
	ActionUpdate   Action = "update"
	ActionRollback Action = "rollback"
)

// Revision is one recorded state of an allocation (a Team or the Policy):
// what it became, who made it so and when.
type Revision[T any] struct {
	Revision int       `json:"revision"`
	At       time.Time `json:"at"`
	By       string    `json:"by"`
	Action   Action    `json:"action"`
	// RolledBackTo is the revision a rollback restored.
	RolledBackTo int    `json:"rolledBackTo,omitempty"`
	Note         string `json:"note,omitempty"`
	Allocation   T      `json:"allocation"`
}

type (
	TeamRevision   = Revision[Team]
	PolicyRevision = Revision[Policy]
)

// FindRevision returns the revision numbered n.
func FindRevision[T any](revs []Revision[T], n int) (Revision[T], bool) {
	for _, r := range revs {
		if r.Revision == n {
			return r, true
		}
	}
	return Revision[T]{}, false
}

// NoRevision says why revs has no revision n: it was never made (past the
// newest, or not a revision number), or it is older than the ones kept.
func NoRevision[T any](revs []Revision[T], n int) string {
	newest := 0
	for _, r := range revs {
		newest = max(newest, r.Revision)
	}
	if n > newest || n < 1 {
		return fmt.Sprintf("There is no revision %d: the newest is %d.", n, newest)
	}
	return fmt.Sprintf("There is no revision %d: only the last %d revisions are kept.", n, RevisionLimit)
}

func revisionKey(n int) string { return fmt.Sprintf("%s%06d", revisionKeyPrefix, n) }

// DecodeRevisions reads a revisions ConfigMap's data, oldest first. Entries
// that do not decode (edited by hand) are skipped.
func DecodeRevisions[T any](data map[string]string) []Revision[T] {
	var out []Revision[T]
	for k, v := range data {
		if !strings.HasPrefix(k, revisionKeyPrefix) {
			continue
		}
		var r Revision[T]
		if err := json.Unmarshal([]byte(v), &r); err != nil || r.Revision <= 0 {
			continue
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out
}

// EncodeRevisions writes revisions (oldest first) as ConfigMap data, keeping
// the newest RevisionLimit that fit in maxRevisionsBytes (always the newest one).
func EncodeRevisions[T any](revs []Revision[T]) (map[string]string, error) {
	if len(revs) > RevisionLimit {
		revs = revs[len(revs)-RevisionLimit:]
	}
	encoded := make([]string, len(revs))
	size := 0
	for i, r := range revs {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		encoded[i] = string(b)
		size += len(b) + len(revisionKey(r.Revision))
	}
	first := 0
	for size > maxRevisionsBytes && first < len(revs)-1 {
		size -= len(encoded[first]) + len(revisionKey(revs[first].Revision))
		first++
	}
	data := make(map[string]string, len(revs)-first)
	for i := first; i < len(revs); i++ {
		data[revisionKey(revs[i].Revision)] = encoded[i]
	}
	return data, nil
}

// RevisionFacts are what an apply run knows when it decides on a revision.
type RevisionFacts struct {
	By      string
	At      time.Time
	Changed bool // the run changed an object in the cluster
	Created bool // the run created the team (or the policy)
	// RollbackTo is the revision a rollback restores (0 for other changes);
	// Note says why the change was made, beyond "the admin saved a form".
	RollbackTo int
	Note       string
}

// NextRevision decides whether an apply run records a revision after last,
// and which. It records when the allocation differs from the last revision,
// when the run changed objects in the cluster (a re-apply over hand edits),
// and for a rollback unless it repeats the last one (a retry); an unchanged
// re-apply records nothing.
func NextRevision[T any](last *Revision[T], alloc T, f RevisionFacts) (Revision[T], bool) {
	rev := Revision[T]{Revision: 1, At: f.At, By: f.By, Action: ActionUpdate, Note: f.Note, Allocation: alloc}
	if last != nil {
		rev.Revision = last.Revision + 1
	}
	record := last == nil || f.Changed || !SameAllocation(last.Allocation, alloc)
	switch {
	case f.RollbackTo > 0:
		rev.Action, rev.RolledBackTo = ActionRollback, f.RollbackTo
		record = record || last.Action != ActionRollback || last.RolledBackTo != f.RollbackTo
	case f.Created:
		rev.Action = ActionCreate
	}
	return rev, record
}

// SameAllocation reports whether two allocations (Teams, Policies) are the
// same as the console stores them: their JSON, in which the order of quota
// rows counts (Kueue tries flavors in order).
func SameAllocation[T any](a, b T) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && string(x) == string(y)
}
