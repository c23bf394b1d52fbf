package kueue

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// emit creates an Event. Events are best effort, as in Kubernetes itself: a
// failure is logged and does not fail the change, which is already applied
// and recorded in the history.
func (a Applier) emit(ctx context.Context, ev *corev1.Event) {
	if _, err := a.records().CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		a.log().Warn("emitting event", "reason", ev.Reason, "object", ev.InvolvedObject.Name, "err", err)
	}
}
