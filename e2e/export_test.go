package e2e

import (
	"encoding/csv"
	"os"
	"testing"

	"github.com/playwright-community/playwright-go"
)

// Every table's Export CSV link is a link on the page and downloads a CSV
// whose header is that table's.
func TestExportLinksDownloadTheirTables(t *testing.T) {
	env := sandboxEnv(t)
	base := startConsole(t, env)
	page := newPage(t)
	expect := playwright.NewPlaywrightAssertions()

	for _, tc := range []struct {
		path, link, firstColumn string
	}{
		{"/", "#export-instances", "Instance type"},
		{"/", "#export-queues", "ClusterQueue"},
		{"/teams", "#export-teams", "Team"},
		{"/teams", "#export-by-type", "Instance type"},
		{"/tasks", "#export-classes", "Priority class"},
		{"/tasks", "#export-breakdown", "Team"},
		{"/tasks", "#export-tasks", "Namespace"},
		{"/preemptions", "#export-preemptions", "When (UTC)"},
		{"/reports/usage", "#export-summary", "Day (UTC)"},
		{"/reports/usage", "#export-tasks-report", "Namespace"},
		// The same report in the layout of SageMaker HyperPod's usage report.
		{"/reports/usage", "#export-hyperpod", "ClusterName"},
	} {
		t.Run(tc.path+tc.link, func(t *testing.T) {
			if _, err := page.Goto(base + tc.path); err != nil {
				t.Fatal(err)
			}
			link := page.Locator(tc.link)
			if err := expect.Locator(link).ToContainText("Export CSV"); err != nil {
				t.Fatalf("%s on %s: %v", tc.link, tc.path, err)
			}
			download, err := page.ExpectDownload(func() error { return link.Click() })
			if err != nil {
				t.Fatal(err)
			}
			path, err := download.Path()
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r := csv.NewReader(f)
			r.FieldsPerRecord = -1 // the HyperPod layout starts with header lines of two fields
			header, err := r.Read()
			if err != nil {
				t.Fatalf("%s: %v", tc.link, err)
			}
			if header[0] != tc.firstColumn {
				t.Errorf("%s downloads a table whose header is %q, want it to start with %q", tc.link, header, tc.firstColumn)
			}
		})
	}
}
