package app_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/internal/webtest"
)

// A queue serving two namespaces that orders its waiting tasks by recent
// use, as its admin wrote it: imported, its form keeps the choice; after one
// namespace used all its GPUs, the other's task, submitted later, is
// admitted first. Changed through the form, the choice is written to the
// queue (Kueue v0.19 applies a change to an existing queue when it restarts).
func TestRecentUseAdmitsTheLighterNamespaceFirst(t *testing.T) {
	waitsOnTheCluster(t)
	c := newConsole(t)
	ctx := context.Background()
	clients := applyGPUFlavor(t, c)
	h := testenv.ApplyHandMadeWith(t, clients, gpuFlavor, "", func(cq *kueuev1beta2.ClusterQueue) {
		cq.Spec.AdmissionScope = &kueuev1beta2.AdmissionScope{AdmissionMode: kueuev1beta2.UsageBasedAdmissionFairSharing}
	})
	research, vision, team := h.Namespaces[0], h.Namespaces[1], h.ClusterQueue

	preview := c.eventually(t, "/queues/"+team+"/import", `name="fingerprint"`)
	imp := url.Values{}
	for _, m := range regexp.MustCompile(`name="(queue|fingerprint)" value="([^"]+)"`).FindAllStringSubmatch(preview, -1) {
		imp.Add(m[1], m[2])
	}
	if code, _, body := c.post(t, "/queues/import", imp); code != 303 {
		t.Fatalf("importing %s: %d\n%.400s", team, code, body)
	}
	edit := c.eventually(t, "/teams/"+team+"/edit", `id="order"`)
	if form := webtest.FormValues(t, edit, "team-form"); form.Get("order") != "recentUse" {
		t.Errorf("the imported team's form orders by %q, want recentUse as its queue does", form.Get("order"))
	}

	// research holds the queue's 4 GPUs until Kueue has counted its use.
	h.Workload(t, research, "hog", 4)
	h.WaitAdmitted(t, 1, 1)
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		lq, err := c.kueue.KueueV1beta2().LocalQueues(research).Get(ctx, "user-queue", metav1.GetOptions{})
		if err != nil || lq.Status.FairSharing == nil || lq.Status.FairSharing.AdmissionFairSharingStatus == nil {
			return false, nil
		}
		gpus := lq.Status.FairSharing.AdmissionFairSharingStatus.ConsumedResources[domain.ResourceGPU]
		return gpus.Sign() > 0, nil
	})
	if err != nil {
		t.Fatal("Kueue never counted the research namespace's recent use")
	}
	// Both namespaces wait for the GPUs; research asked first.
	h.Workload(t, research, "research-next", 4)
	time.Sleep(1100 * time.Millisecond) // creation times a second apart
	h.Workload(t, vision, "vision-next", 4)
	h.WaitAdmitted(t, 1, 3)

	page := c.eventually(t, "/usage/"+team, `id="recent-use"`)
	rows := webtest.HTMLRows(t, page, "recent-use", webtest.ByAttr("data-queue"))
	if got := rows[vision+"/user-queue"]; len(got) == 0 || got[0] != "1" {
		t.Errorf("the team page's recent use puts %s at %v, want first: %v", vision, got, rows)
	}

	finish(t, c.kueue.KueueV1beta2().Workloads(research), "hog")
	var got map[string]string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		got = h.Admissions(t)
		return got[research+"/research-next"] != "pending" || got[vision+"/vision-next"] != "pending", nil
	})
	if err != nil || !strings.HasPrefix(got[vision+"/vision-next"], team) {
		t.Errorf("with research's recent use counted, Kueue admitted %v; want vision's task first", got)
	}

	// Back to priority order through the form: the queue's admissionScope goes.
	form := webtest.FormValues(t, c.eventually(t, "/teams/"+team+"/edit", `id="order"`), "team-form")
	form.Set("order", "priority")
	if code, _, body := c.post(t, "/teams/"+team, form); code != 303 {
		t.Fatalf("saving team %s: %d\n%.600s", team, code, body)
	}
	cq, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, team, metav1.GetOptions{})
	if err != nil || domain.OrdersByRecentUse(cq.Spec.AdmissionScope) {
		t.Errorf("after ordering by priority, %s's admissionScope is %+v (%v), want no admission fair sharing", team, cq.Spec.AdmissionScope, err)
	}
}

// finish marks a Workload finished, as its job's controller would.
func finish(t *testing.T, wls interface {
	Get(context.Context, string, metav1.GetOptions) (*kueuev1beta2.Workload, error)
	UpdateStatus(context.Context, *kueuev1beta2.Workload, metav1.UpdateOptions) (*kueuev1beta2.Workload, error)
}, name string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := wls.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		apimeta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: kueuev1beta2.WorkloadFinished,
			Status: metav1.ConditionTrue, Reason: kueuev1beta2.WorkloadFinishedReasonSucceeded, Message: "done"})
		_, err = wls.UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("finishing Workload %s: %v", name, err)
	}
}

// From the policy page, every team's waiting tasks are ordered by recent
// use at once: each team's queue gets Kueue's admissionScope and a revision
// of its own, and the opposite choice takes it back. A team whose queue was
// edited by hand is left as it is, and the page says so.
func TestPolicyPageOrdersEveryTeamByRecentUse(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	teams := []string{"alpha", "beta", "edited"}
	for _, team := range teams {
		createTeam(t, c, webtest.TeamForm(team, "1"))
	}
	// Someone raises edited's quota with kubectl.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cq, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, c.settings.ClusterQueue("edited"), metav1.GetOptions{})
		if err != nil {
			return err
		}
		cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("3")
		_, err = c.kueue.KueueV1beta2().ClusterQueues().Update(ctx, cq, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "/teams/edited/drift", `id="drift-summary"`)

	policy := c.eventually(t, "/policy", `id="recent-use-recent-use"`)
	choice := webtest.FormValues(t, policy, "recent-use-recent-use")
	if got := choice.Get("previewed"); got != "alpha, beta, edited" {
		t.Fatalf("the choice names %q, want alpha, beta, edited", got)
	}
	if code, _, body := c.post(t, "/policy/recent-use", choice); code != 303 {
		t.Fatalf("ordering every team by recent use: %d\n%.600s", code, body)
	}
	_, page := c.get(t, "/policy?saved=1")
	webtest.MustContain(t, "the policy page after the change", page, "2 teams (alpha, beta)", "edited by hand: edited")
	for _, team := range teams {
		cq, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, c.settings.ClusterQueue(team), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if team == "edited" {
			if domain.OrdersByRecentUse(cq.Spec.AdmissionScope) || cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota.Value() != 3 {
				t.Errorf("the hand-edited team was written: admissionScope %+v, quota %v", cq.Spec.AdmissionScope,
					cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota.String())
			}
			continue
		}
		if !domain.OrdersByRecentUse(cq.Spec.AdmissionScope) {
			t.Errorf("%s's admissionScope is %+v, want admission fair sharing", team, cq.Spec.AdmissionScope)
		}
		history := c.eventually(t, "/teams/"+team+"/history", "ordered by recent use from the cluster policy")
		webtest.MustContain(t, team+"'s history", history, `data-rev="2"`)
	}

	policy = c.eventually(t, "/policy", `id="recent-use-arrival"`)
	back := webtest.FormValues(t, policy, "recent-use-arrival")
	if got := back.Get("previewed"); got != "alpha, beta" {
		t.Errorf("ordering by arrival names %q, want alpha, beta", got)
	}
	if code, _, body := c.post(t, "/policy/recent-use", back); code != 303 {
		t.Fatalf("ordering every team by arrival: %d\n%.600s", code, body)
	}
	for _, team := range teams[:2] {
		cq, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, c.settings.ClusterQueue(team), metav1.GetOptions{})
		if err != nil || domain.OrdersByRecentUse(cq.Spec.AdmissionScope) {
			t.Errorf("after ordering by arrival, %s's admissionScope is %+v (%v)", team, cq.Spec.AdmissionScope, err)
		}
	}
}
