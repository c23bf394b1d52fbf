package helm

// Tests of the chart's alerts (templates/prometheusrule.yaml, whose rules are
// files/rules.yaml) and Grafana dashboard (templates/grafana-dashboard.yaml,
// files/dashboard.json): the rules as the chart renders them pass promtool's
// check and its unit tests (testdata/alerts/*.test.yaml, a firing and a
// quiet case for every alert), and every expression of the rules and the
// dashboard reads only metrics that the console exports or that Kueue and
// dcgm-exporter provide.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/sandbox"
)

const (
	alertFixtures = "testdata/alerts"
	dashboardFile = chartDir + "/files/dashboard.json"
)

var (
	promtoolOnce sync.Once
	promtoolPath string
	promtoolErr  error
)

// promtoolBinary is Prometheus's promtool from tools/promtool.sh (Debian's
// prometheus package, fetched once per machine into the tools cache);
// $PROMTOOL, when set, is used instead. Without it the test fails: the
// alerts are untested otherwise.
func promtoolBinary(t *testing.T) string {
	t.Helper()
	promtoolOnce.Do(func() {
		if promtoolPath = os.Getenv("PROMTOOL"); promtoolPath != "" {
			return
		}
		root, err := sandbox.RepoRoot()
		if err != nil {
			promtoolErr = err
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command("bash", filepath.Join(root, "tools", "promtool.sh"))
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			promtoolErr = fmt.Errorf("promtool is needed to test the chart's alert rules, and tools/promtool.sh could not provide it "+
				"(set PROMTOOL to a promtool binary instead): %v\n%s", err, stderr.String())
			return
		}
		promtoolPath = strings.TrimSpace(string(out))
	})
	if promtoolErr != nil {
		t.Fatal(promtoolErr)
	}
	return promtoolPath
}

// promtool runs promtool in dir and returns its output.
func promtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(promtoolBinary(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ruleFile is a Prometheus rule file (the PrometheusRule's spec).
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Record      string            `json:"record"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func (f ruleFile) alerts() []string {
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !slices.Contains(out, r.Alert) {
				out = append(out, r.Alert)
			}
		}
	}
	return out
}

// renderRules renders the chart's PrometheusRule with alerts on (and args)
// and returns its spec, a rule file, as YAML and decoded.
func renderRules(t *testing.T, args ...string) ([]byte, ruleFile) {
	t.Helper()
	objs := render(t, "quota-console", append([]string{"--set", "alerts.enabled=true", "--show-only", "templates/prometheusrule.yaml"}, args...)...)
	if len(objs) != 1 || objs[0].GetKind() != "PrometheusRule" || objs[0].GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Fatalf("rendered %v, want one monitoring.coreos.com/v1 PrometheusRule", placed(objs))
	}
	data, err := yaml.Marshal(objs[0].Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		t.Fatalf("the PrometheusRule's spec is not a rule file: %v", err)
	}
	return data, f
}

// byClassArgs render the rules of testdata/alerts/long-wait-by-class.test.yaml.
var byClassArgs = []string{"--set", "alerts.longWait.byClass.inference=15m"}

// The rules the chart renders, with its defaults and with a class of its
// own, pass promtool check rules, and promtool test rules runs the
// fixtures against them.
func TestAlertRulesPassPromtool(t *testing.T) {
	dir := t.TempDir()
	defaults, _ := renderRules(t)
	byClass, _ := renderRules(t, byClassArgs...)
	for name, data := range map[string][]byte{"rules.yaml": defaults, "rules-by-class.yaml": byClass} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := promtool(t, dir, "check", "rules", "rules.yaml", "rules-by-class.yaml")
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	t.Logf("promtool check rules:\n%s", out)
	tests := fixtureFiles(t)
	for _, path := range tests {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(path)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"test", "rules"}
	for _, path := range tests {
		args = append(args, filepath.Base(path))
	}
	out, err = promtool(t, dir, args...)
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("promtool test rules:\n%s", out)
}

func fixtureFiles(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(alertFixtures, "*.test.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no alert fixtures in %s: %v", alertFixtures, err)
	}
	return paths
}

// alertFixture is what the coverage check reads of a promtool test file.
type alertFixture struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// Every alert the chart renders has a fixture where it fires and one where
// it does not.
func TestEveryAlertHasFiringAndQuietFixtures(t *testing.T) {
	_, defaults := renderRules(t)
	_, byClass := renderRules(t, byClassArgs...)
	files := map[string]ruleFile{"rules.yaml": defaults, "rules-by-class.yaml": byClass}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, path := range fixtureFiles(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f alertFixture
		if err := yaml.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(f.RuleFiles) != 1 {
			t.Fatalf("%s: rule_files %v, want one of %v", path, f.RuleFiles, []string{"rules.yaml", "rules-by-class.yaml"})
		}
		rules, ok := files[f.RuleFiles[0]]
		if !ok {
			t.Fatalf("%s: rule file %s is not one the test renders", path, f.RuleFiles[0])
		}
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if !slices.Contains(rules.alerts(), a.Alertname) {
					t.Errorf("%s, %s: the rules have no alert %s", path, tc.Name, a.Alertname)
				}
				if len(a.ExpAlerts) > 0 {
					firing[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	alerts := defaults.alerts()
	if len(alerts) != 10 {
		t.Errorf("%d alerts rendered with the defaults, want 10: %v", len(alerts), alerts)
	}
	for _, a := range alerts {
		if !firing[a] {
			t.Errorf("no fixture in %s where %s fires", alertFixtures, a)
		}
		if !quiet[a] {
			t.Errorf("no fixture in %s where %s stays quiet", alertFixtures, a)
		}
	}
}

// The values reach the rules: thresholds, windows, each alert's switch,
// the alerts' labels and the PrometheusRule's.
func TestChartAlertValues(t *testing.T) {
	_, f := renderRules(t, "--set", "alerts.idleGPUs.utilizationPercent=5", "--set", "alerts.idleGPUs.window=2h",
		"--set", "alerts.longWait.default=1d", "--set", "alerts.sustainedBorrowing.window=6h", "--set", "alerts.starvingClass.window=30m",
		"--set", "alerts.quotaBeyondReadyNodes.for=1h", "--set", "alerts.taskHistory.for=20m", "--set", "alerts.prometheus.for=5m",
		"--set", "alerts.alertLabels.routing=gpu-platform", "--set", "alerts.prometheus.enabled=false")
	want := map[string][]string{
		"QuotaConsoleIdleGPUs":                   {`[2h]) < 5`, `offset 2h`},
		"QuotaConsoleLongWait":                   {`> 86400`},
		"QuotaConsoleSustainedBorrowing":         {`[6h:1m]`, `offset 6h`},
		"QuotaConsoleStarvingClass":              {`> 1800`, `<= 1800`},
		"QuotaConsoleTeamQuotaBeyondReadyNodes":  {"for: 1h"},
		"QuotaConsoleInstanceTypeOversubscribed": {"for: 1h"},
		"QuotaConsoleHistoryNotRecording":        {"for: 20m"},
		"QuotaConsoleHistoryWriteErrors":         {"for: 20m"},
		"QuotaConsoleHistoryGaps":                {},
	}
	var got []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			got = append(got, r.Alert)
			for _, w := range want[r.Alert] {
				if held, ok := strings.CutPrefix(w, "for: "); ok {
					if r.For != held {
						t.Errorf("%s: for %q, want %s", r.Alert, r.For, held)
					}
				} else if !strings.Contains(r.Expr, w) {
					t.Errorf("%s: %q not in its expression:\n%s", r.Alert, w, r.Expr)
				}
			}
			if r.Labels["routing"] != "gpu-platform" || r.Labels["severity"] == "" {
				t.Errorf("%s: labels %v, want severity and routing=gpu-platform", r.Alert, r.Labels)
			}
		}
	}
	// QuotaConsolePrometheusUnreachable is switched off.
	if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Compact(slices.Sorted(slices.Values(got)))); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}

	// alertLabels may replace the severity.
	_, f = renderRules(t, "--set", "alerts.alertLabels.severity=page")
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Labels["severity"] != "page" {
				t.Errorf("%s: severity %q, want alertLabels' page", r.Alert, r.Labels["severity"])
			}
		}
	}
	// The PrometheusRule's own labels, for the operator's ruleSelector.
	objs := render(t, "quota-console", "--set", "alerts.enabled=true", "--set", "alerts.labels.release=prometheus",
		"--show-only", "templates/prometheusrule.yaml")
	if l := objs[0].GetLabels(); l["release"] != "prometheus" || l["app.kubernetes.io/part-of"] != "quota-console" {
		t.Errorf("PrometheusRule labels %v", l)
	}
}

// The dashboard's ConfigMap carries the Grafana sidecar's label and the
// file as it is.
func TestChartDashboardConfigMap(t *testing.T) {
	file, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name              string
		args              []string
		namespace, label  string
		value, annotation string
	}{
		{"defaults", nil, "quota-console", "grafana_dashboard", "1", ""},
		{"another sidecar", []string{"--set", "grafanaDashboard.namespace=monitoring", "--set", "grafanaDashboard.label=dashboards.example.com/grafana",
			"--set", "grafanaDashboard.labelValue=quota", "--set", "grafanaDashboard.annotations.grafana_folder=GPU quota"},
			"monitoring", "dashboards.example.com/grafana", "quota", "GPU quota"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "quota-console", append([]string{"--set", "grafanaDashboard.enabled=true", "--show-only", "templates/grafana-dashboard.yaml"}, tc.args...)...)
			cm := typed[corev1.ConfigMap](t, objs, "ConfigMap")
			if cm.Namespace != tc.namespace || cm.Name != "qc-quota-console-dashboard" {
				t.Errorf("ConfigMap %s/%s", cm.Namespace, cm.Name)
			}
			if cm.Labels[tc.label] != tc.value {
				t.Errorf("labels %v, want %s=%s", cm.Labels, tc.label, tc.value)
			}
			if cm.Annotations["grafana_folder"] != tc.annotation {
				t.Errorf("annotations %v", cm.Annotations)
			}
			if got := cm.Data["quota-console.json"]; got != strings.TrimRight(string(file), "\n") {
				t.Errorf("quota-console.json is not %s as it is", dashboardFile)
			}
		})
	}
}

// dashboard is what the checks read of a Grafana dashboard.
type dashboard struct {
	Title, UID string
	Templating struct {
		List []struct {
			Name, Type string
			Query      any
		}
	}
	Panels []struct {
		ID         int
		Type       string
		Title      string
		Datasource struct{ Type, UID string }
		GridPos    struct{ X, Y, W, H int }
		Targets    []struct {
			RefID      string `json:"refId"`
			Expr       string
			Datasource struct{ Type, UID string }
		}
	}
}

// The dashboard is valid JSON with unique panel ids and places, a
// Prometheus datasource variable every panel and query uses, and queries
// that promtool parses.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(data) {
		t.Fatalf("%s is not valid JSON", dashboardFile)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q, uid %q", d.Title, d.UID)
	}
	variables := map[string]string{}
	for _, v := range d.Templating.List {
		variables[v.Name] = v.Type
	}
	if variables["datasource"] != "datasource" || variables["team"] != "query" {
		t.Errorf("variables %v, want datasource (a datasource) and team (a query)", variables)
	}
	ids := map[int]string{}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for _, p := range d.Panels {
		if p.ID <= 0 || ids[p.ID] != "" {
			t.Errorf("panel %q: id %d is not unique and positive", p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Title == "" || p.Type == "" || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %d: title %q, type %q, place %+v", p.ID, p.Title, p.Type, p.GridPos)
		}
		if p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the datasource variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if q.RefID == "" || refs[q.RefID] || q.Expr == "" || q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: query %q (%q) needs a unique refId, an expression and the datasource variable", p.Title, q.RefID, q.Expr)
			}
			refs[q.RefID] = true
			expr := grafanaVariables.Replace(q.Expr)
			fmt.Fprintf(&rules, "      - record: dashboard_panel_%d_%s\n        expr: %s\n", p.ID, q.RefID, yamlString(expr))
		}
	}
	if len(d.Panels) < 8 {
		t.Errorf("%d panels", len(d.Panels))
	}
	// promtool parses every query, as recording rules.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard-rules.yaml"), []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool(t, dir, "check", "rules", "dashboard-rules.yaml"); err != nil {
		t.Errorf("the dashboard's queries do not parse: %v\n%s", err, out)
	}
}

// grafanaVariables stand in for the dashboard's variables, for promtool.
var grafanaVariables = strings.NewReplacer("$team", ".*")

// yamlString quotes s as a YAML (JSON) string.
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Every metric the rules and the dashboard read is one the console
// exports (gathered from its registry with every part registered), one of
// Kueue's (from the source of the Kueue version the console is built
// with), or one of dcgm-exporter's the console's own charts read.
func TestAlertsAndDashboardReadKnownMetrics(t *testing.T) {
	known := consoleMetricNames(t)
	for _, n := range kueueMetricNames(t) {
		known[n] = "Kueue"
	}
	for _, n := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"} {
		known[n] = "dcgm-exporter"
	}
	check := func(where, expr string) {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s reads no metric: %s", where, expr)
		}
		for _, n := range names {
			if known[n] == "" {
				t.Errorf("%s reads %s, which neither the console, Kueue nor dcgm-exporter exports:\n%s", where, n, expr)
			}
		}
	}
	for _, args := range [][]string{nil, byClassArgs} {
		_, f := renderRules(t, args...)
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				check("alert "+r.Alert, r.Expr)
			}
		}
	}
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			check(fmt.Sprintf("panel %q query %s", p.Title, q.RefID), q.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			// label_values(metric, label): the metric.
			if s, _ := q["query"].(string); strings.HasPrefix(s, "label_values(") && strings.Contains(s, ",") {
				check("variable "+v.Name, strings.TrimPrefix(s[:strings.LastIndex(s, ",")], "label_values("))
			}
		}
	}
}

// The parts of an expression that are not metric names: strings, label
// matchers, ranges, grouping and matching clauses.
var (
	promStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promClauses  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promWords    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true, "ignoring": true,
		"group_left": true, "group_right": true, "offset": true, "bool": true, "inf": true, "nan": true, "Inf": true, "NaN": true}
)

// metricNames are the metric names an expression reads (not functions,
// aggregations, keywords or label names), sorted.
func metricNames(expr string) []string {
	s := promStrings.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRanges.ReplaceAllString(s, " ")
	s = promClauses.ReplaceAllString(s, " ")
	seen := map[string]bool{}
	for _, at := range promWords.FindAllStringIndex(s, -1) {
		word := s[at[0]:at[1]]
		if at[0] > 0 && strings.ContainsAny(s[at[0]-1:at[0]], "0123456789.") {
			continue // a duration's unit or a number's exponent
		}
		if strings.HasPrefix(strings.TrimLeft(s[at[1]:], " \t\n"), "(") || promKeywords[word] {
			continue // a function or aggregation, or a keyword
		}
		seen[word] = true
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`max by (team, cluster_queue) (quota_console_team_borrowed{resource="nvidia.com/gpu"} offset 4h) > 0`: {"quota_console_team_borrowed"},
		`count by (team) (max_over_time(DCGM_FI_DEV_GPU_UTIL{pod!=""}[1h]) < 10 and DCGM_FI_DEV_GPU_UTIL offset 1h) * on (namespace) group_left (team) label_replace(topk by (team_namespace) (1, quota_console_namespace_team), "namespace", "$1", "team_namespace", "(.+)")`: {
			"DCGM_FI_DEV_GPU_UTIL", "quota_console_namespace_team"},
		`time() - max(x:recorded) <= 7200 unless on () sum(rate(kueue_admitted_workloads_total[5m:1m])) > bool 1e3`: {"kueue_admitted_workloads_total", "x:recorded"},
	} {
		if diff := cmp.Diff(want, metricNames(expr)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", expr, diff)
		}
	}
}

// consoleMetricNames are the metrics the console exports, by name: its
// registry with the cluster figures of a small cluster, the task history
// and a Prometheus registered.
func consoleMetricNames(t *testing.T) map[string]string {
	t.Helper()
	s := domain.DefaultSettings
	now := time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 3, 24, now)
	snap := domain.BuildSnapshot(domain.SnapshotInput{Settings: s, ClusterQueues: objs.ClusterQueues, LocalQueues: objs.LocalQueues,
		Workloads: objs.Workloads, Classes: objs.Classes}, now)
	gpus := resource.MustParse("8")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{domain.InstanceTypeLabel: "ml.p5.48xlarge"}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{domain.ResourceGPU: gpus}, Allocatable: corev1.ResourceList{domain.ResourceGPU: gpus},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	nodes := []*corev1.Node{node}
	teams := []domain.TeamState{{Team: domain.Team{Name: "team-000",
		Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](8)}}}, ClusterQueue: objs.ClusterQueues[0]}}

	c := metrics.NewConsole()
	c.RegisterCluster(metrics.ClusterSources{
		Snapshot:      func() *domain.Snapshot { return snap },
		InstanceTypes: func() []domain.InstanceTypeCapacity { return domain.BuildOverview(s, nodes, nil).InstanceTypes },
		Teams:         func() []domain.TeamState { return teams },
		Fleet:         func() (domain.ShapeLookup, map[string]int) { return domain.LiveShapes(nodes) },
	})
	c.RegisterTaskHistory(func() bool { return false }, func() metrics.TaskHistoryStats { return metrics.TaskHistoryStats{} })
	p, err := metrics.NewProm("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	c.ObservePrometheus(p)
	families, err := prometheus.Gatherers{c.Registry, c.Cluster}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, f := range families {
		names[f.GetName()] = "the console"
		if f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+suffix] = "the console"
			}
		}
	}
	// Every series a rule reads must have been gathered: the fixture
	// above must produce each.
	for _, n := range []string{"quota_console_team_class_last_admission_timestamp_seconds", "quota_console_team_instance_type_quota",
		"quota_console_prometheus_queries_total", "quota_console_history_enabled"} {
		if names[n] == "" {
			t.Fatalf("the console's registry gave no %s: the fixture is too small", n)
		}
	}
	return names
}

// kueueMetricNames are the metrics of the Kueue version in the console's
// go.mod, read from its source (pkg/metrics), with the series names of
// histograms.
func kueueMetricNames(t *testing.T) []string {
	t.Helper()
	root, err := sandbox.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/kueue: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "pkg", "metrics", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`Subsystem:\s*constants\.KueueName,\s*Name:\s*"(\w+)"`).FindAllStringSubmatch(string(src), -1) {
		n := "kueue_" + m[1]
		names = append(names, n, n+"_bucket", n+"_sum", n+"_count")
	}
	if !slices.Contains(names, "kueue_admitted_workloads_total") || !slices.Contains(names, "kueue_cluster_queue_nominal_quota") {
		t.Fatalf("Kueue's metrics not found in its source: %v", names)
	}
	return names
}
