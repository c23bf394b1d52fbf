package handlers_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/webtest"
)

// The overview counts every instance, the Teams page the ready ones: with
// one of five p5 instances NotReady, each says which it counts, on the page
// and in its CSV.
func TestPagesSayWhichInstancesTheyCount(t *testing.T) {
	f := newFixture(t, 1, 0)
	p5 := domain.InstanceTypeCapacity{Type: "ml.p5.48xlarge", Count: 5, Ready: 4, NotReady: 1, GPUs: 40}
	total := p5
	total.Type = "Total"
	f.cluster.overview = domain.Overview{InstanceTypes: []domain.InstanceTypeCapacity{p5}, Total: total}
	f.cluster.available = map[string]int{p5.Type: p5.Ready}
	f.cluster.addTeam(f.settings, domain.Team{Name: "team-000", Enabled: true, FairShareWeight: 10,
		Quota: []domain.QuotaInput{{InstanceType: p5.Type, GPUs: ptr(int64(8))}}})
	h := f.handler()

	code, overview := webtest.Get(t, h, "/")
	if code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	webtest.MustContain(t, "the overview", overview, "All instances", "This table counts every instance, ready or not")
	code, teams := webtest.Get(t, h, "/teams")
	if code != 200 {
		t.Fatalf("GET /teams = %d", code)
	}
	webtest.MustContain(t, "the Teams page", teams, "Ready instances", "ready capacity", "the overview counts every instance")

	csvOf := func(path string) ([]string, [][]string) {
		code, body := webtest.Get(t, h, path)
		return webtest.ReadCSV(t, path, code, body)
	}
	header, rows := csvOf("/?format=csv&table=instance-types")
	all := webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Instance type"] })[p5.Type]
	header, rows = csvOf("/teams?format=csv&table=by-type")
	ready := webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Instance type"] })[p5.Type]
	got := map[string]string{"all": all["All instances (count)"], "ready on the overview": all["Ready (count)"],
		"ready on the Teams page": ready["Ready instances (count)"]}
	want := map[string]string{"all": "5", "ready on the overview": "4", "ready on the Teams page": "4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instances counted (-want +got):\n%s", diff)
	}
}
