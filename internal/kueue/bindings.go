package kueue

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/openquota/console/internal/domain"
)

// bindingsTimeout bounds the reads of one page's RoleBindings.
const bindingsTimeout = 3 * time.Second

// Bindings reads the RoleBindings of the namespaces a team's queue serves,
// with the console's own client, when a page asks: an imported team's
// members are what those bindings say. The caller shows them only to a user
// who may list RoleBindings there.
type Bindings struct{ Kube kubernetes.Interface }

// Of lists the subjects bound in namespaces.
func (b Bindings) Of(ctx context.Context, namespaces []string) ([]domain.Binding, error) {
	ctx, cancel := context.WithTimeout(ctx, bindingsTimeout)
	defer cancel()
	var all []rbacv1.RoleBinding
	for _, ns := range namespaces {
		list, err := b.Kube.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the RoleBindings of namespace %s: %w", ns, err)
		}
		all = append(all, list.Items...)
	}
	return domain.BindingsOf(all), nil
}
