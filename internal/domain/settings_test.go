package domain

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func TestTeamOfClusterQueue(t *testing.T) {
	cases := map[string]*kueuev1beta2.ClusterQueue{
		"nlp":      {ObjectMeta: metav1.ObjectMeta{Name: "hyperpod-ns-nlp-clusterqueue"}},
		"labelled": {ObjectMeta: metav1.ObjectMeta{Name: "hyperpod-ns-labelled-clusterqueue", Labels: map[string]string{TeamLabel: "labelled"}}},
		"imported": {ObjectMeta: metav1.ObjectMeta{Name: "research-cq", Labels: map[string]string{ManagedByLabel: ManagedByValue, TeamLabel: "imported", ImportedLabel: "true"}}},
		// The import labels without the console's managed-by label (which the
		// admission policy lets only the console's admins set): made by
		// whoever may create ClusterQueues, not a queue of team nlp.
		"rogue-cq": {ObjectMeta: metav1.ObjectMeta{Name: "rogue-cq", Labels: map[string]string{TeamLabel: "nlp", ImportedLabel: "true"}}},
		// Another console's team "labelled" (prefix hyperpod-ns-x-): the
		// team its name gives here, not a second queue of team labelled.
		"x-labelled": {ObjectMeta: metav1.ObjectMeta{Name: "hyperpod-ns-x-labelled-clusterqueue", Labels: map[string]string{TeamLabel: "labelled"}}},
		// A hand-made copy keeping the label: a queue of its own.
		"labelled-copy": {ObjectMeta: metav1.ObjectMeta{Name: "labelled-copy", Labels: map[string]string{TeamLabel: "labelled"}}},
		"handmade":      {ObjectMeta: metav1.ObjectMeta{Name: "handmade"}},
	}
	for want, cq := range cases {
		if got := DefaultSettings.TeamOfClusterQueue(cq); got != want {
			t.Errorf("TeamOfClusterQueue(%s) = %q, want %q", cq.Name, got, want)
		}
	}
}

func TestTeamOfClusterQueueName(t *testing.T) {
	s := Settings{NamespacePrefix: "hyperpod-ns-"}
	for cq, want := range map[string]string{
		"hyperpod-ns-vision-clusterqueue":      "vision",
		"hyperpod-ns-ml-research-clusterqueue": "ml-research",
		"hyperpod-ns--clusterqueue":            "",
		"other-vision-clusterqueue":            "",
		"hyperpod-ns-vision":                   "",
	} {
		got, ok := s.TeamOfClusterQueueName(cq)
		if got != want || ok != (want != "") {
			t.Errorf("TeamOfClusterQueueName(%q) = %q, %v; want %q", cq, got, ok, want)
		}
	}
}

func TestTeamOfNamespace(t *testing.T) {
	s := Settings{NamespacePrefix: "hyperpod-ns-"}
	for ns, want := range map[string]string{"hyperpod-ns-nlp": "nlp", "hyperpod-ns-": "", "kube-system": "", "hyperpod-nlp": ""} {
		got, ok := s.TeamOfNamespace(ns)
		if got != want || ok != (want != "") {
			t.Errorf("TeamOfNamespace(%q) = %q, %v; want %q", ns, got, ok, want)
		}
	}
}
