package kueue

import (
	"strings"
	"testing"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

// The preview names as uncertain what it does not run of a queue.
func TestThePreviewSaysWhatItDoesNotRun(t *testing.T) {
	checks := kueuetest.MakeClusterQueue("checks").Obj()
	checks.Spec.AdmissionChecksStrategy = &kueuev1beta2.AdmissionChecksStrategy{AdmissionChecks: []kueuev1beta2.AdmissionCheckStrategyRule{{Name: "sample-prov"}}}
	concurrent := kueuetest.MakeClusterQueue("concurrent").Obj()
	concurrent.Spec.ConcurrentAdmissionPolicy = &kueuev1beta2.ConcurrentAdmissionPolicy{
		Migration: kueuev1beta2.ConcurrentAdmissionMigration{Mode: kueuev1beta2.ConcurrentAdmissionTryPreferredFlavors}}
	for _, tc := range []struct {
		cq   *kueuev1beta2.ClusterQueue
		want string
	}{
		{kueuetest.MakeClusterQueue("plain").Obj(), ""},
		{checks, "admission checks"},
		{concurrent, "concurrent admission"},
	} {
		got := uncertainOf(tc.cq)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("queue %s: %q, want it to name %q", tc.cq.Name, got, tc.want)
		}
	}
}
