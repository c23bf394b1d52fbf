package write

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// An imported queue whose quota is all on flavors the form does not show
// (Kueue's default-flavor) has an allocation without quota rows: it can be
// re-applied, adopted and rolled back, as its form can be saved. A team
// of the console's own still needs a row.
func TestAnAllocationOfKeptFlavorsOnlyCanBeApplied(t *testing.T) {
	cq := &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cluster-queue", Labels: domain.ImportLabels("cluster-queue")},
		Spec: kueuev1beta2.ClusterQueueSpec{ResourceGroups: []kueuev1beta2.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
			Flavors: []kueuev1beta2.FlavorQuotas{{Name: "default-flavor", Resources: []kueuev1beta2.ResourceQuota{
				{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("9")}}}}}}}}
	team := domain.Team{Name: "cluster-queue", Enabled: true, FairShareWeight: 1, Preemption: domain.PreemptNever,
		Lending: domain.LendAndBorrow, BorrowLimitPercent: 100}
	if msg := TeamProblem("cluster-queue", team, cq, domain.LookupShape); msg != "" {
		t.Errorf("an imported queue of kept flavors: %q", msg)
	}
	if msg := TeamProblem("cluster-queue", team, nil, domain.LookupShape); msg == "" {
		t.Error("an allocation without quota rows, queue unknown: no problem")
	}
}
