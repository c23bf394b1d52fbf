package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/webtest"
)

// An imported team's members are the RoleBindings of the namespaces its
// queue serves. The edit form and the import preview list them, each
// namespace's only to a user who may list RoleBindings there, and the
// console reads none of the others.
func TestImportedTeamMembersAreItsNamespacesBindings(t *testing.T) {
	f := newFixture(t, 1, 0).withProxy()
	s, now := f.settings, time.Now()
	labels := domain.ImportLabels("cluster-queue")
	cq := kueuetest.MakeClusterQueue("cluster-queue").Nominal(8, nil).
		Labels(domain.ManagedByLabel, labels[domain.ManagedByLabel], domain.TeamLabel, "cluster-queue", domain.ImportedLabel, "true").Obj()
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	objs.ClusterQueues = append(objs.ClusterQueues, cq)
	objs.LocalQueues = append(objs.LocalQueues, kueuetest.MakeLocalQueue("default", "user-queue", "cluster-queue"),
		kueuetest.MakeLocalQueue("research", "user-queue", "cluster-queue"))
	f.model.publish(snapshotOf(s, objs, now))
	f.cluster.teams = append(f.cluster.teams, domain.TeamState{Team: domain.Team{Name: "cluster-queue", Enabled: true,
		Lending: domain.LendAndBorrow, BorrowLimitPercent: 100}, ClusterQueue: cq})
	f.writes.served = map[string][]string{"other-queue": {"default", "research"}}
	rbs := &bindings{of: map[string][]domain.Binding{
		"default":  {{Namespace: "default", Binding: "runners", Role: "ClusterRole edit", Subject: domain.Member{Kind: "User", Name: "ana"}}},
		"research": {{Namespace: "research", Binding: "secret-team", Role: "ClusterRole edit", Subject: domain.Member{Kind: "User", Name: "hidden-person"}}},
	}}
	f.cfg.Bindings = rbs
	f.access.grant("admin", listClusterQueues, editTeams, mayListRoleBindings("default"))
	admin := user(t, f.handler(), "admin")

	for _, page := range []struct{ path, table string }{
		{"/teams/cluster-queue/edit", "team-bindings"},
		{"/queues/other-queue/import", "import-members-other-queue"},
	} {
		code, body := admin.Get(page.path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d\n%.300s", page.path, code, body)
		}
		got := webtest.HTMLRows(t, body, page.table, webtest.ByAttr("data-subject"))
		want := map[string][]string{"default User ana": {"default", "ana", "User", "ClusterRole edit", "runners"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: members (-want +got):\n%s", page.path, diff)
		}
		if strings.Contains(body, "hidden-person") {
			t.Errorf("%s shows a binding of a namespace the admin may not list RoleBindings in", page.path)
		}
		if !strings.Contains(body, "Not shown: the RoleBindings of research, which you may not list.") {
			t.Errorf("%s does not say which namespace's members it leaves out", page.path)
		}
	}
	if _, body := admin.Get("/teams/cluster-queue/edit"); !strings.Contains(body, `<output id="namespace-preview">default, research</output>`) {
		t.Error("the imported team's form does not name the namespaces its queue serves")
	}
	if diff := cmp.Diff([][]string{{"default"}, {"default"}, {"default"}}, rbs.asked); diff != "" {
		t.Errorf("namespaces read (-want +got):\n%s", diff)
	}
	// A managed team's form keeps its member fields.
	if _, body := admin.Get("/teams/team-000/edit"); !strings.Contains(body, `id="users"`) || strings.Contains(body, `id="team-bindings"`) {
		t.Error("a managed team's form lost its member fields")
	}
}
