package domain

import "slices"

// Readings are hardware utilization readings added up: the sum of the
// per-GPU (or per-partition) figures in %, and how many there were. Added
// over several namespaces they average over every GPU, not over the
// namespaces.
type Readings struct{ Sum, Count float64 }

// Add is r and o together.
func (r Readings) Add(o Readings) Readings { return Readings{r.Sum + o.Sum, r.Count + o.Count} }

// Average is the readings' average in %; ok is false without a reading.
func (r Readings) Average() (avg float64, ok bool) {
	if r.Count <= 0 {
		return 0, false
	}
	return r.Sum / r.Count, true
}

// NamespaceTeams is the team each namespace's pods count for: the team of
// every ClusterQueue its LocalQueues feed, when they feed one team only. A
// namespace feeding several teams' queues maps to "": the GPU exporter
// names a GPU's namespace and pod, not its task, so the GPUs of that
// namespace cannot be told apart by team. A namespace absent from the map
// feeds no queue now.
func NamespaceTeams(rows []TeamUsage) map[string]string {
	out := map[string]string{}
	for _, r := range rows {
		for _, ns := range r.Namespaces {
			if team, seen := out[ns]; seen && team != r.Team {
				out[ns] = ""
				continue
			}
			out[ns] = r.Team
		}
	}
	return out
}

// TeamNamespaces are the namespaces whose pods count for team alone
// (NamespaceTeams), sorted as rows list them.
func TeamNamespaces(rows []TeamUsage, team string) []string {
	teams := NamespaceTeams(rows)
	var out []string
	for _, r := range rows {
		if r.Team != team {
			continue
		}
		for _, ns := range r.Namespaces {
			if teams[ns] == team {
				out = append(out, ns)
			}
		}
	}
	return out
}

// UtilizationByTeam is each team's average utilization over the GPUs its
// namespaces' pods hold (teams: NamespaceTeams); a team without a reading
// is absent, and nil readings (none asked yet) are nil.
func UtilizationByTeam(byNamespace map[string]Readings, teams map[string]string) map[string]float64 {
	if byNamespace == nil {
		return nil
	}
	sums := map[string]Readings{}
	for ns, r := range byNamespace {
		if team := teams[ns]; team != "" {
			sums[team] = sums[team].Add(r)
		}
	}
	return averages(sums)
}

// GPUReadingsByTeam gathers readings of one GPU each by namespace into
// their teams (teams: NamespaceTeams), sorted; nil readings are nil.
func GPUReadingsByTeam(byNamespace map[string][]float64, teams map[string]string) map[string][]float64 {
	if byNamespace == nil {
		return nil
	}
	out := map[string][]float64{}
	for ns, r := range byNamespace {
		if team := teams[ns]; team != "" {
			out[team] = append(out[team], r...)
		}
	}
	for _, r := range out {
		slices.Sort(r)
	}
	return out
}

// PartitionUtilizationByTeam is UtilizationByTeam per MIG profile: by team
// and profile ("mig-1g.10gb").
func PartitionUtilizationByTeam(byNamespace map[string]map[string]Readings, teams map[string]string) map[string]map[string]float64 {
	if byNamespace == nil {
		return nil
	}
	sums := map[string]map[string]Readings{}
	for ns, profiles := range byNamespace {
		team := teams[ns]
		if team == "" {
			continue
		}
		if sums[team] == nil {
			sums[team] = map[string]Readings{}
		}
		for profile, r := range profiles {
			sums[team][profile] = sums[team][profile].Add(r)
		}
	}
	out := make(map[string]map[string]float64, len(sums))
	for team, profiles := range sums {
		if avg := averages(profiles); len(avg) > 0 {
			out[team] = avg
		}
	}
	return out
}

func averages(sums map[string]Readings) map[string]float64 {
	out := make(map[string]float64, len(sums))
	for k, r := range sums {
		if avg, ok := r.Average(); ok {
			out[k] = avg
		}
	}
	return out
}
