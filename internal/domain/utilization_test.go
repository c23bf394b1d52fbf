package domain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUtilizationByTeamReadsTheNamespacesThatFeedIt(t *testing.T) {
	rows := []TeamUsage{
		{Team: "nlp", Namespaces: []string{"hyperpod-ns-nlp"}},
		// A queue the console did not create, fed from two namespaces, one
		// of which also feeds nlp's queue.
		{Team: "cluster-queue", Namespaces: []string{"default", "research"}},
		{Team: "vision", Namespaces: []string{"hyperpod-ns-vision", "research"}},
	}
	teams := NamespaceTeams(rows)
	if diff := cmp.Diff(map[string]string{"hyperpod-ns-nlp": "nlp", "default": "cluster-queue", "research": "", "hyperpod-ns-vision": "vision"}, teams); diff != "" {
		t.Errorf("NamespaceTeams (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"hyperpod-ns-vision"}, TeamNamespaces(rows, "vision")); diff != "" {
		t.Errorf("TeamNamespaces(vision) (-want +got):\n%s", diff)
	}

	cases := []struct {
		name        string
		byNamespace map[string]Readings
		want        map[string]float64
	}{
		{name: "nothing asked yet", want: nil},
		{name: "a namespace's GPUs count for its team alone",
			byNamespace: map[string]Readings{"default": {Sum: 74, Count: 2}, "research": {Sum: 100, Count: 1}, "elsewhere": {Sum: 5, Count: 1}},
			want:        map[string]float64{"cluster-queue": 37}},
		{name: "GPUs, not namespaces, are averaged",
			byNamespace: map[string]Readings{"hyperpod-ns-nlp": {Sum: 300, Count: 3}, "hyperpod-ns-vision": {Sum: 10, Count: 1}},
			want:        map[string]float64{"nlp": 100, "vision": 10}},
		{name: "no reading is no figure", byNamespace: map[string]Readings{"hyperpod-ns-nlp": {}}, want: map[string]float64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, UtilizationByTeam(tc.byNamespace, teams)); diff != "" {
				t.Errorf("UtilizationByTeam (-want +got):\n%s", diff)
			}
		})
	}
	partitions := map[string]map[string]Readings{"default": {"mig-1g.10gb": {Sum: 80, Count: 2}}, "research": {"mig-1g.10gb": {Sum: 1, Count: 1}}}
	if diff := cmp.Diff(map[string]map[string]float64{"cluster-queue": {"mig-1g.10gb": 40}}, PartitionUtilizationByTeam(partitions, teams)); diff != "" {
		t.Errorf("PartitionUtilizationByTeam (-want +got):\n%s", diff)
	}
}
