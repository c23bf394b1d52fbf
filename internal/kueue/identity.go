package kueue

import (
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// Identity is whom a change or a permission check is for: a signed-in user
// as the cluster's authenticator (a TokenReview) or the proxy named them, or
// the console itself when Name is empty. The console never acts as anyone
// else: it asks the cluster what the user may do (SubjectAccessReviews, see
// Access) and makes the changes with its own identity.
type Identity struct {
	Name   string
	Groups []string
	UID    string
	Extra  map[string][]string
}

// Clients are the console's own clients.
type Clients struct {
	Kube  kubernetes.Interface
	Kueue kueueclient.Interface
}

// NewClients makes the console's own clients from its configuration.
func NewClients(cfg *rest.Config) (Clients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	kq, err := kueueclient.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Kube: kube, Kueue: kq}, nil
}
