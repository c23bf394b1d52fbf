package write

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openquota/console/internal/kueue"
)

func TestFailedSaysWhyInWords(t *testing.T) {
	cq := schema.GroupKind{Group: "kueue.x-k8s.io", Kind: "ClusterQueue"}
	cases := []struct {
		name string
		err  error
		says string
	}{
		{"webhook validation", apierrors.NewInvalid(cq, "t", field.ErrorList{
			field.Invalid(field.NewPath("spec", "resourceGroups").Index(0).Child("flavors").Index(0).Child("resources").Index(0).Child("nominalQuota"), "-1", "must be greater than or equal to 0"),
		}), "Kueue refused this allocation, so nothing was changed: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: \"-1\": must be greater than or equal to 0"},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "clusterqueues"}, "t", errors.New("no")), "not allowed"},
		{"conflict", apierrors.NewConflict(schema.GroupResource{Resource: "clusterqueues"}, "t", errors.New("changed")), "same time"},
		{"timeout", apierrors.NewServerTimeout(schema.GroupResource{Resource: "clusterqueues"}, "apply", 1), "Saving again"},
		{"no connection", errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), "could not be reached"},
		{"webhook denial", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
			Message: `admission webhook "vclusterqueue.kb.io" denied the request: spec.resourceGroups[0].flavors[0].resources[3].borrowingLimit: Invalid value: -1`}},
			"Kueue refused this allocation"},
		{"webhook down", apierrors.NewInternalError(errors.New(`failed calling webhook "vclusterqueue.kb.io": connection refused`)), "webhook did not answer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := failed(tc.err, "your account bob", "team t").Message; !strings.Contains(got, tc.says) {
				t.Errorf("failed(%v) = %q, want it to contain %q", tc.err, got, tc.says)
			}
		})
	}
}

func TestFailedTellsWhoMayNot(t *testing.T) {
	cq := schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "clusterqueues"}
	refused := fmt.Errorf("cluster queue x: %w", apierrors.NewForbidden(cq, "x", errors.New(`User "bob" cannot patch resource "clusterqueues"`)))
	o := failed(refused, "your account bob", "team x")
	if o.Kind != Forbidden || !strings.HasPrefix(o.Message, "You may not change team x: your account bob is not allowed") || !strings.Contains(o.Message, "cannot patch") {
		t.Errorf("%v %q", o.Kind, o.Message)
	}
	console := apierrors.NewForbidden(cq, "x", errors.New(`User "system:serviceaccount:quota-console:quota-console" cannot patch resource "clusterqueues"`))
	// In auth mode none the console's account is the user's: "You may not".
	if o := failed(console, consoleAccount, "team x"); o.Kind != Forbidden || !strings.HasPrefix(o.Message, "You may not change team x: the console's own account") {
		t.Errorf("the console's account refused, auth mode none: %v %q", o.Kind, o.Message)
	}
	// After a signed-in user was allowed, the console's own request refused
	// by RBAC: its ServiceAccount lacks the console's roles.
	if o := failedForUser(console, "team x"); o.Kind != Forbidden || !strings.Contains(o.Message, "The console may not change team x") ||
		!strings.Contains(o.Message, "apply the console's RBAC") {
		t.Errorf("the console's account refused: %v %q", o.Kind, o.Message)
	}
	// Refused by the admission policy: the values, not the user.
	policy := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `resourceflavors.kueue.x-k8s.io "ml.p5.48xlarge" is forbidden: ValidatingAdmissionPolicy 'quota-console-admin-scope' with binding 'quota-console-admin-scope' denied request: quota-console-admin may change only Kueue objects the console manages`}}
	if o := failedForUser(policy, "team x"); o.Kind != Rejected || !strings.Contains(o.Message, "admission policy refused") ||
		!strings.Contains(o.Message, "only Kueue objects the console manages") {
		t.Errorf("refused by the admission policy: %v %q", o.Kind, o.Message)
	}
	if o := failed(errors.New("forbidden"), "your account bob", "team x"); o.Kind == Forbidden {
		t.Error("a plain error taken for a Forbidden status")
	}
}

func TestNotAllowedNamesEveryMissingRight(t *testing.T) {
	o := notAllowed("bob", "team x", []kueue.Permission{
		{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "clusterqueues", Name: "hyperpod-ns-x-clusterqueue"},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: "hyperpod-ns-x", Name: "quota-console-team-member"},
	})
	want := "You may not change team x: your account bob is not allowed to make this change in the cluster, so nothing was changed. " +
		"Ask a platform admin for the quota-console-admin role. The cluster does not allow you to " +
		"patch clusterqueues.kueue.x-k8s.io hyperpod-ns-x-clusterqueue; " +
		"create rolebindings.rbac.authorization.k8s.io quota-console-team-member in namespace hyperpod-ns-x."
	if diff := cmp.Diff(want, o.Message); diff != "" || o.Kind != Forbidden {
		t.Errorf("kind %v, message (-want +got):\n%s", o.Kind, diff)
	}
}

// A change that failed partway says what went through, never that nothing
// was changed: the cluster enforces what was written.
func TestFailedPartwaySaysWhatWentThrough(t *testing.T) {
	lost := &kueue.PartlyWritten{Written: []string{"namespace hyperpod-ns-t", "cluster queue hyperpod-ns-t-clusterqueue"},
		Err: errors.New("local queue hyperpod-ns-t-localqueue: read: connection reset by peer")}
	denied := &kueue.PartlyWritten{Written: []string{"cluster queue hyperpod-ns-t-clusterqueue"},
		Err: apierrors.NewInvalid(schema.GroupKind{Group: "kueue.x-k8s.io", Kind: "LocalQueue"}, "t",
			field.ErrorList{field.Invalid(field.NewPath("spec", "clusterQueue"), "x", "field is immutable")})}
	unknown := &kueue.PartlyWritten{Err: errors.New("namespace hyperpod-ns-t: EOF")}
	deleting := &kueue.PartlyWritten{Written: []string{"local queue hyperpod-ns-t-localqueue deleted"}, Deleting: true,
		Err: apierrors.NewServiceUnavailable("etcd is down")}
	for _, tc := range []struct {
		err  error
		kind Kind
		says []string
	}{
		{lost, Unavailable, []string{"stopped partway", "this went through: namespace hyperpod-ns-t, cluster queue hyperpod-ns-t-clusterqueue", "could not be reached", "Making the same change again finishes it"}},
		{denied, Rejected, []string{"stopped partway", "cluster queue hyperpod-ns-t-clusterqueue", "Kueue refused this allocation: spec.clusterQueue"}},
		{unknown, Unavailable, []string{"part of it may have gone through"}},
		{deleting, Unavailable, []string{"stopped partway", "local queue hyperpod-ns-t-localqueue deleted", "Deleting again finishes it"}},
	} {
		o := failed(fmt.Errorf("saving: %w", tc.err), "your account bob", "team t")
		if o.Kind != tc.kind {
			t.Errorf("%v: kind %v, want %v", tc.err, o.Kind, tc.kind)
		}
		for _, s := range tc.says {
			if !strings.Contains(o.Message, s) {
				t.Errorf("%v: %q does not say %q", tc.err, o.Message, s)
			}
		}
		if strings.Contains(o.Message, "nothing was changed") {
			t.Errorf("%v: %q says nothing was changed", tc.err, o.Message)
		}
	}
}
