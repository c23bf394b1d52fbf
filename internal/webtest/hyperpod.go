package webtest

import (
	"encoding/csv"
	"strings"
	"testing"
)

// HyperPodHeaderLines are the common header lines that start each report
// of SageMaker HyperPod's usage report, as its documentation names them.
var HyperPodHeaderLines = []string{"ClusterName", "Type", "Date Generated", "Date Range (UTC)", "Missing data periods"}

// HyperPodReport is one report (summary or detailed) of a usage report CSV
// in HyperPod's layout: its header lines by name, its columns, and its rows
// as maps by column.
type HyperPodReport struct {
	Header  map[string]string
	Columns []string
	Rows    []map[string]string
}

// ReadHyperPodCSV splits a usage report CSV in HyperPod's layout into its
// reports: each starts with its header lines, then its columns.
func ReadHyperPodCSV(t testing.TB, body string) []HyperPodReport {
	t.Helper()
	r := csv.NewReader(strings.NewReader(body))
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v\n%.500s", err, body)
	}
	var out []HyperPodReport
	for i := 0; i < len(records); {
		if records[i][0] != HyperPodHeaderLines[0] || i+len(HyperPodHeaderLines) >= len(records) {
			t.Fatalf("line %d: %q, want a report's %q line", i+1, records[i], HyperPodHeaderLines[0])
		}
		rep := HyperPodReport{Header: map[string]string{}}
		for j, name := range HyperPodHeaderLines {
			line := records[i+j]
			if len(line) != 2 || line[0] != name {
				t.Fatalf("header line %d: %q, want %q and its value", i+j+1, line, name)
			}
			rep.Header[name] = line[1]
		}
		i += len(HyperPodHeaderLines)
		rep.Columns = records[i]
		for i++; i < len(records) && records[i][0] != HyperPodHeaderLines[0]; i++ {
			if len(records[i]) != len(rep.Columns) {
				t.Fatalf("line %d has %d fields, its report %d columns", i+1, len(records[i]), len(rep.Columns))
			}
			row := map[string]string{}
			for j, col := range rep.Columns {
				row[col] = records[i][j]
			}
			rep.Rows = append(rep.Rows, row)
		}
		out = append(out, rep)
	}
	return out
}
