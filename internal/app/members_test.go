package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// clusterQueuePatcher is a user who may read and patch ClusterQueues and
// nothing the console manages besides (as Kueue's batch-admin role
// allows), with a client acting as them.
func clusterQueuePatcher(t *testing.T, c console) kueueclient.Interface {
	t.Helper()
	ctx := context.Background()
	user := "batch-admin-" + rand.String(5)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-cq-patcher-" + user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"clusterqueues"}, Verbs: []string{"get", "list", "patch"}}}}
	if _, err := c.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	testenv.BindUser(t, c.kube, user, role.Name)
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate.UserName = user
	return kueueclient.NewForConfigOrDie(cfg)
}

// plantMember adds a member to the allocation annotation of a team's
// ClusterQueue, as the patcher (a merge patch: no other field changes).
func plantMember(t *testing.T, c console, as kueueclient.Interface, team string, m domain.Member) {
	t.Helper()
	var cqTeam domain.Team
	if err := json.Unmarshal([]byte(c.clusterQueue(t, team).Annotations[domain.AllocationAnnotation]), &cqTeam); err != nil {
		t.Fatal(err)
	}
	cqTeam.Members = append(cqTeam.Members, m)
	raw, _ := json.Marshal(cqTeam)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{domain.AllocationAnnotation: string(raw)}}})
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := as.KueueV1beta2().ClusterQueues().Patch(ctx, c.settings.ClusterQueue(team), types.MergePatchType, patch, metav1.PatchOptions{})
		return err == nil, nil // until the binding reaches the authorizer
	})
	if err != nil {
		t.Fatalf("the patcher could not patch the ClusterQueue of %s", team)
	}
	// The console's cache sees the planted member.
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		cq, err := c.cache.ClusterQueues.Get(c.settings.ClusterQueue(team))
		return err == nil && strings.Contains(cq.Annotations[domain.AllocationAnnotation], m.Name), nil
	}); err != nil {
		t.Fatal("the console's cache never saw the planted member")
	}
}

// boundMembers are the subjects of the team member RoleBinding in the
// team's namespace.
func boundMembers(t *testing.T, c console, team string) []string {
	t.Helper()
	rb, err := c.kube.RbacV1().RoleBindings(c.settings.Namespace(team)).Get(context.Background(), domain.TeamMemberRole, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range rb.Subjects {
		out = append(out, s.Kind+" "+s.Name)
	}
	return out
}

// showsDrift waits until the team's drift page lists differences, and
// returns it; it goes on (with an error) when it never does.
func showsDrift(t *testing.T, c console, team string) string {
	t.Helper()
	var body string
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, body = c.get(t, "/teams/"+team+"/drift")
		return strings.Contains(body, `id="drift"`), nil
	}); err != nil {
		t.Errorf("the drift page of %s never lists a difference", team)
	}
	return body
}

// Someone who may patch ClusterQueues, but not RoleBindings (a Kueue
// batch-admin), adds a member to the allocation annotation of a team's
// ClusterQueue. The console read members from that annotation: the admin's
// edit form showed the planted member (a save bound them), and re-applying
// the allocation over hand edits bound them. Members now come from the
// console's own revisions; the planted one shows as drift only, and a team
// with no revision yet trusts no member of its annotation.
func TestMembersPlantedOnTheClusterQueueAreNotBound(t *testing.T) {
	c := auditConsole(t, nil)
	team := "planted-" + rand.String(4)
	if code, _, body := c.post(t, "/teams", webtest.TeamForm(team, "2")); code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%.500s", code, body)
	}
	patcher := clusterQueuePatcher(t, c)
	mallory := "mallory-" + rand.String(5)
	plantMember(t, c, patcher, team, domain.Member{Kind: "User", Name: mallory})

	_, form := c.get(t, "/teams/"+team+"/edit")
	if strings.Contains(form, mallory) {
		t.Errorf("the admin's edit form shows the member planted on the ClusterQueue (%s)", mallory)
	}
	body := showsDrift(t, c, team)
	webtest.MustContain(t, "drift page", body, "Members on the ClusterQueue differ from the last saved revision", mallory)

	code, _, body := c.post(t, "/teams/"+team+"/drift/reapply", url.Values{})
	if code != http.StatusSeeOther {
		t.Fatalf("re-apply: %d\n%.500s", code, body)
	}
	if bound := boundMembers(t, c, team); slices.Contains(bound, "User "+mallory) || !slices.Contains(bound, "User alice") {
		t.Errorf("after re-apply the team's members are %v: want alice and the group ml, never %s", bound, mallory)
	}
	if raw := c.clusterQueue(t, team).Annotations[domain.AllocationAnnotation]; strings.Contains(raw, mallory) {
		t.Errorf("re-apply kept the planted member in the annotation: %s", raw)
	}

	// A team recorded before revisions existed: its history is gone.
	legacy := "legacy-" + rand.String(4)
	if code, _, body := c.post(t, "/teams", webtest.TeamForm(legacy, "2")); code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%.500s", code, body)
	}
	if err := c.kube.CoreV1().ConfigMaps(c.settings.State()).Delete(context.Background(), domain.TeamRevisionsName(c.settings, legacy), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	plantMember(t, c, patcher, legacy, domain.Member{Kind: "User", Name: mallory})
	body = showsDrift(t, c, legacy)
	webtest.MustContain(t, "drift page of a team without revisions", body, "no saved revision", mallory)
	if _, form := c.get(t, "/teams/"+legacy+"/edit"); strings.Contains(form, mallory) {
		t.Errorf("the edit form of a team without revisions shows the member planted on the ClusterQueue (%s)", mallory)
	}
	if code, _, body := c.post(t, "/teams/"+legacy+"/drift/reapply", url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("re-apply: %d\n%.500s", code, body)
	}
	if bound := boundMembers(t, c, legacy); slices.Contains(bound, "User "+mallory) {
		t.Errorf("after re-apply the members of a team without revisions are %v: the planted %s is bound", bound, mallory)
	}
}

// A viewer may read ClusterQueues but not RoleBindings, so the console
// shows them no member. The allocation annotation of a team's ClusterQueue
// named the members, and a viewer read them there with kubectl. Members are
// kept in the team's revisions (the console's namespace) only; the
// revisions still name them, and the member binding still binds them.
func TestViewersCannotReadMembersOnTheClusterQueue(t *testing.T) {
	c := auditConsole(t, nil)
	team := "secret-" + rand.String(4)
	member := "secret-user-" + rand.String(5) + "@example.com"
	form := webtest.TeamForm(team, "2")
	form.Set("users", member)
	if code, _, body := c.post(t, "/teams", form); code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%.500s", code, body)
	}
	viewer := bindUser(t, c.kube, "viewer", rbac.ViewerRole)
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate.UserName = viewer
	var cq *kueuev1beta2.ClusterQueue
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cq, err = kueueclient.NewForConfigOrDie(cfg).KueueV1beta2().ClusterQueues().Get(ctx, c.settings.ClusterQueue(team), metav1.GetOptions{})
		return err == nil, nil // until the binding reaches the authorizer
	}); err != nil {
		t.Fatalf("the viewer cannot read the team's ClusterQueue: %v", err)
	}
	for k, v := range cq.Annotations {
		if strings.Contains(v, member) {
			t.Errorf("a viewer reads the team's member %s in the ClusterQueue's annotation %s: %s", member, k, v)
		}
	}
	if bound := boundMembers(t, c, team); !slices.Contains(bound, "User "+member) {
		t.Errorf("the team's members are %v: want %s bound", bound, member)
	}
	revs, err := c.kube.CoreV1().ConfigMaps(c.settings.State()).Get(context.Background(), domain.TeamRevisionsName(c.settings, team), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if latest := domain.LatestRevision[domain.Team](revs.Data); latest == nil || !slices.ContainsFunc(latest.Allocation.Members, func(m domain.Member) bool { return m.Name == member }) {
		t.Errorf("the team's revision does not name its member %s: %+v", member, latest)
	}
	if _, page := c.get(t, "/teams/"+team+"/drift"); strings.Contains(page, `id="drift"`) {
		t.Errorf("a team just saved shows drift:\n%.2000s", page)
	}
}

// A ClusterQueue whose allocation annotation names the team's members, as
// earlier versions wrote it: the console removes them when it starts, and
// changes nothing else; the team shows no drift before or after.
func TestStartRemovesMembersFromEarlierAnnotations(t *testing.T) {
	c := auditConsole(t, nil)
	team := "earlier-" + rand.String(4)
	if code, _, body := c.post(t, "/teams", webtest.TeamForm(team, "2")); code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%.500s", code, body)
	}
	before := c.clusterQueue(t, team)
	var written map[string]any
	if err := json.Unmarshal([]byte(before.Annotations[domain.AllocationAnnotation]), &written); err != nil {
		t.Fatal(err)
	}
	written["members"] = []domain.Member{{Kind: "User", Name: "alice"}, {Kind: "Group", Name: "ml"}}
	raw, _ := json.Marshal(written)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{domain.AllocationAnnotation: string(raw)}}})
	if _, err := c.kueue.KueueV1beta2().ClusterQueues().Patch(context.Background(), before.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		cq, err := c.cache.ClusterQueues.Get(before.Name)
		return err == nil && strings.Contains(cq.Annotations[domain.AllocationAnnotation], "alice"), nil
	}); err != nil {
		t.Fatal("the console's cache never saw the earlier annotation")
	}
	if _, page := c.get(t, "/teams/"+team+"/drift"); strings.Contains(page, `id="drift"`) {
		t.Errorf("the saved members on the annotation show as drift:\n%.2000s", page)
	}

	startConsole(t, setup{settings: c.settings}) // the next start
	var after *kueuev1beta2.ClusterQueue
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		after = c.clusterQueue(t, team)
		return !strings.Contains(after.Annotations[domain.AllocationAnnotation], "alice"), nil
	}); err != nil {
		t.Fatalf("the members stay in the annotation: %s", after.Annotations[domain.AllocationAnnotation])
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(after.Annotations[domain.AllocationAnnotation]), &got); err != nil {
		t.Fatal(err)
	}
	delete(written, "members")
	if diff := cmp.Diff(written, got); diff != "" {
		t.Errorf("the annotation changed beyond its members (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(before.Spec, after.Spec); diff != "" {
		t.Errorf("the ClusterQueue's spec changed (-before +after):\n%s", diff)
	}
	if bound := boundMembers(t, c, team); !slices.Contains(bound, "User alice") {
		t.Errorf("the team's members are %v: want alice still bound", bound)
	}
}
