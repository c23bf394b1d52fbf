package domain

import kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

// QueueWrites says, field by field, what a save changes on a ClusterQueue
// against the live one ("preemption within the team (withinClusterQueue):
// Never → LowerPriority"), over the fields the console manages: the drift
// of the live queue from what the save builds. A hand edit the save undoes
// shows with the changes the form asked for.
func QueueWrites(live, next *kueuev1beta2.ClusterQueue) []string {
	if live == nil || next == nil {
		return nil
	}
	var out []string
	for _, d := range clusterQueueDrift("", next.Spec, live.Spec) {
		out = append(out, d.Field+": "+orWord(d.Got, "none")+" → "+orWord(d.Want, "none"))
	}
	return out
}

func orWord(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
