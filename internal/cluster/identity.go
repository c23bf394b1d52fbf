package cluster

import (
	"errors"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// Identity is whom the cluster is asked as: a signed-in user, by
// impersonation, or the console itself when Name is empty.
type Identity struct {
	Name   string
	Groups []string
	UID    string
	Extra  map[string][]string
}

// Clients are the console's own clients, and build clients that act as a
// user (Kubernetes impersonation) from its configuration.
type Clients struct {
	Kube  kubernetes.Interface
	Kueue kueueclient.Interface
	// Config is the console's own client configuration; without it the
	// console cannot act as anyone else.
	Config *rest.Config
}

// As returns clients that act as id; the console's own for the console.
// They share the console's connections: client-go caches transports by TLS
// configuration.
func (c Clients) As(id Identity) (kubernetes.Interface, kueueclient.Interface, error) {
	if id.Name == "" {
		return c.Kube, c.Kueue, nil
	}
	if c.Config == nil {
		return nil, nil, errors.New("the console's client configuration is needed to act as a signed-in user")
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: id.Name, Groups: id.Groups}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	kq, err := kueueclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return kube, kq, nil
}

// Applier is the console's Applier acting as id: it changes the cluster as
// id and records revisions and Events as the console.
func (c Clients) Applier(base Applier, id Identity) (Applier, error) {
	kube, kq, err := c.As(id)
	if err != nil {
		return Applier{}, err
	}
	return base.As(kube, kq), nil
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
	return Clients{Kube: kube, Kueue: kq, Config: cfg}, nil
}
