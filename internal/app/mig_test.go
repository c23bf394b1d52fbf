package app_test

import (
	"context"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/internal/webtest"
)

// Teams with quotas of MIG partitions on the sandbox's A100 nodes: a Job
// asking for more 1g.10gb partitions than its team holds is admitted by
// borrowing the other team's, shows with its partitions on the tasks page
// and in the team's limits, and the per-task report counts its
// partition-hours (and their whole-GPU equivalent) from the Workload's
// times.
func TestMIGQuotaAdmitsAndBorrows(t *testing.T) {
	waitsOnTheCluster(t)
	s := taskHistorySettings()
	st := taskHistoryStore{cfg: taskhistory.Config{Driver: taskhistory.DriverSQLite, Path: filepath.Join(t.TempDir(), "history.db")}}.open(t)
	hc := startTaskHistoryConsole(t, s, storeTaskHistory(st), st, nil)
	c := hc.console
	t.Cleanup(func() { cleanupTeams(c) })
	ctx := context.Background()
	const p4de, profile = "ml.p4de.24xlarge", "mig-1g.10gb"
	for _, team := range []struct{ name, partitions string }{{"mig-small", "2"}, {"mig-lender", "4"}} {
		form := webtest.TeamForm(team.name, "")
		form.Set("quota.0.instanceType", p4de)
		form.Del("quota.0.gpus")
		form.Set("quota.0.partition", profile)
		form.Set("quota.0.partitions", team.partitions)
		form.Set("borrowLimit", "100")
		if code, _, body := c.post(t, "/teams", form); code != 303 {
			t.Fatalf("creating team %s: %d\n%.800s", team.name, code, body)
		}
	}
	cq := c.clusterQueue(t, "mig-small")
	found := false
	for _, r := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
		if r.Name == domain.PartitionResource(profile) {
			found = r.NominalQuota.Value() == 2
		}
	}
	if !found {
		t.Fatalf("team mig-small's ClusterQueue has no quota of 2 %s: %+v", profile, cq.Spec.ResourceGroups)
	}

	job := testenv.Submit(t, c.kube, testenv.Job{Namespace: c.settings.Namespace("mig-small"), LocalQueue: c.settings.LocalQueue("mig-small"),
		Name: "notebook", Partition: profile, Partitions: 3, InstanceType: p4de, RunFor: 20 * time.Second})
	testenv.WorkloadOf(t, c.kueue, job, "admitted", testenv.CondTrue(kueuev1beta2.WorkloadQuotaReserved))
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cq, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, c.settings.ClusterQueue("mig-small"), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, f := range cq.Status.FlavorsUsage {
			for _, r := range f.Resources {
				if r.Name == domain.PartitionResource(profile) {
					return r.Total.Value() == 3 && r.Borrowed.Value() == 1, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Kueue never counted 3 %s in use, 1 borrowed, for mig-small", profile)
	}

	tasks := c.eventually(t, "/tasks?team=mig-small", "3 × "+profile)
	if !strings.Contains(tasks, "notebook") {
		t.Error("the tasks page does not list the notebook")
	}
	var row []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, page := c.get(t, "/usage/mig-small")
		row = webtest.HTMLRows(t, page, "team-limits", webtest.ByAttr("data-limit"))[p4de+"/"+profile+" partitions"]
		return len(row) >= 7 && row[2] == "2" && row[3] == "3" && row[6] == "1", nil
	})
	if err != nil {
		t.Errorf("the team's %s row: %v, want quota 2, in use 3, borrowed 1", profile, row)
	}
	// The usage page's tab of the profile: mig-small uses 3 of its 2 and
	// borrows 1, which mig-lender lends.
	var rows map[string][]string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, page := c.get(t, "/usage?resource="+profile)
		rows = webtest.HTMLRows(t, page, "team-usage", webtest.ByAttr("data-team"))
		small, lender := rows["mig-small"], rows["mig-lender"]
		return len(small) > 4 && len(lender) > 4 && small[1] == "2" && small[2] == "3" && small[3] == "1" && lender[1] == "4" && lender[4] == "1", nil
	})
	if err != nil {
		t.Errorf("the usage page's %s rows: %v; want mig-small 2 allocated, 3 in use, 1 borrowed, mig-lender 4 allocated, 1 lent", profile, rows)
	}

	// Finished, the task's partition-hours are its three partitions over
	// the time its admission held them.
	wl := testenv.WorkloadOf(t, c.kueue, job, "finished", testenv.CondTrue(kueuev1beta2.WorkloadFinished))
	start, end := since(wl, kueuev1beta2.WorkloadAdmitted), since(wl, kueuev1beta2.WorkloadFinished)
	held := end.Sub(start)
	want := map[string]string{"GPU partitions (MIG)": "3 × " + profile, "Borrowed": "true",
		"Partition-hours (h)": domain.FormatHours(3 * held.Hours()), "Partition GPU-equivalent hours (h)": domain.FormatHours(3.0 / 7 * held.Hours())}
	report := "/reports/usage?source=history&from=" + start.UTC().Format("2006-01-02") + "&to=" + end.UTC().Format("2006-01-02") +
		"&team=mig-small&format=csv&table=tasks"
	var got map[string]string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		r := csvRecords(t, c, report, func(r map[string]string) string { return r["Task"] })[wl.Name]
		got = map[string]string{}
		for k := range want {
			got[k] = r[k]
		}
		return r["End (UTC)"] != "" && got["Partition-hours (h)"] == want["Partition-hours (h)"], nil
	})
	if err != nil {
		t.Errorf("the per-task report says %v; from the Workload's %s held: %v", got, held, want)
	}
	// The daily usage summary counts the same partition-hours, one of the
	// three partitions borrowed over the time it was held.
	day := start.UTC().Format("2006-01-02")
	if end.UTC().Format("2006-01-02") != day {
		t.Logf("the notebook ran over midnight (UTC): its summary is two days' rows, not compared")
	} else {
		summary := strings.Replace(report, "table=tasks", "table=summary", 1)
		used, borrowed := profile+" partition-hours used (h)", profile+" partition-hours borrowed (h)"
		wantRow := map[string]string{used: domain.FormatHours(3 * held.Hours()), borrowed: domain.FormatHours(held.Hours())}
		var gotRow map[string]string
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			r := csvRecords(t, c, summary, func(r map[string]string) string { return r["Day (UTC)"] + "/" + r["Team"] + "/" + r["Instance type"] })[day+"/mig-small/"+p4de]
			gotRow = map[string]string{used: r[used], borrowed: r[borrowed]}
			return maps.Equal(gotRow, wantRow), nil
		})
		if err != nil {
			t.Errorf("the usage summary's %s row of mig-small: %v, want %v", p4de, gotRow, wantRow)
		}
	}
	if held < 10*time.Second {
		t.Errorf("the notebook held its partitions %s, not about the 20 s it ran", held)
	}
}
