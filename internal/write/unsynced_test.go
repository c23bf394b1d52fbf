package write

import (
	"context"
	"io"
	"log/slog"
	"testing"

	k8sfake "k8s.io/client-go/kubernetes/fake"
	kueuefake "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/webtest"
)

// A console whose caches have not read the cluster yet (its start, or a
// ServiceAccount that may not list ClusterQueues) saw no team and no
// foreign ClusterQueue of the name a create form gave, and wrote over
// them: an existing team's allocation, another tool's ClusterQueue taken
// over. Nothing is written until the caches hold the cluster.
func TestNothingIsWrittenBeforeTheCachesHoldTheCluster(t *testing.T) {
	s := domain.DefaultSettings
	existing := kueuetest.MakeClusterQueue(s.ClusterQueue("nlp")).Labels("app.kubernetes.io/managed-by", "argocd").Obj()
	kq := kueuefake.NewClientset(existing)
	kube := k8sfake.NewClientset()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := Service{Settings: s, Cache: kueue.NewCache(kube, kq, s, log), Applier: kueue.Applier{Kube: kube, Kueue: kq, Log: log}, Log: log}

	o := svc.SaveTeam(context.Background(), kueue.Identity{}, TeamSave{Form: form.ParseTeam(webtest.TeamForm("nlp", "2"))})
	if o.Kind != Unavailable {
		t.Errorf("a create before the caches synced: %v %q, want Unavailable", o.Kind, o.Message)
	}
	for _, a := range append(kq.Actions(), kube.Actions()...) {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("the cluster was written: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
