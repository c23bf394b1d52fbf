package metrics

import (
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/version"
)

func TestBuildInfoMetric(t *testing.T) {
	version.Version, version.Revision = "v1.2.0", "abc123"
	t.Cleanup(func() { version.Version, version.Revision = "", "" })
	families, err := NewConsole().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]string
	for _, f := range families {
		if f.GetName() != "quota_console_build_info" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{"value": "", "type": f.GetType().String()}
			if m.GetGauge().GetValue() == 1 {
				labels["value"] = "1"
			}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got = append(got, labels)
		}
	}
	want := []map[string]string{{"type": "GAUGE", "value": "1", "version": "v1.2.0", "revision": "abc123", "goversion": runtime.Version()}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("quota_console_build_info series (-want +got):\n%s", diff)
	}
}
