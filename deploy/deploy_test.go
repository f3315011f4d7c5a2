package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const (
	alertsFile     = "prometheus/dagflow-alerts.yml"
	alertTestsFile = "prometheus/dagflow-alerts.test.yml"
	dashboardFile  = "grafana/dagflow-dashboard.json"
)

func listed(t *testing.T) catalogue {
	t.Helper()
	ms, err := Metrics()
	if err != nil {
		t.Fatalf("metrics.txt: %v", err)
	}
	return newCatalogue(ms)
}

// TestMetricsDocumented holds the metric list of the README's
// Observability section and the table of docs/observability.md to
// metrics.txt.
func TestMetricsDocumented(t *testing.T) {
	c := listed(t)
	var want []string
	for name := range c {
		if strings.HasPrefix(name, "dagflow_") {
			want = append(want, name)
		}
	}
	slices.Sort(want)
	metric := regexp.MustCompile(`dagflow_[a-z0-9_]+`)
	for _, doc := range []struct{ file, start, row string }{
		{"../README.md", "## Observability\n", ""},
		{"../docs/observability.md", "## Metrics\n", "| `dagflow_"},
	} {
		b, err := os.ReadFile(doc.file)
		if err != nil {
			t.Fatal(err)
		}
		_, section, ok := strings.Cut(string(b), doc.start)
		if !ok {
			t.Errorf("%s: no section %q", doc.file, strings.TrimSpace(doc.start))
			continue
		}
		section, _, _ = strings.Cut(section, "\n## ")
		var got []string
		for _, line := range strings.Split(section, "\n") {
			if doc.row != "" {
				if !strings.HasPrefix(line, doc.row) {
					continue
				}
				line = strings.SplitN(line, "|", 3)[1] // the first column
			}
			got = append(got, metric.FindAllString(line, -1)...)
		}
		slices.Sort(got)
		got = slices.Compact(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: section %q lists\n%v\nmetrics.txt lists\n%v", doc.file, strings.TrimSpace(doc.start), got, want)
		}
	}
}

func TestParseMetricsRefuses(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"fields", "dagflow_x_total counter", "want NAME TYPE LABELS"},
		{"name", "dagflow-x_total counter -", `"dagflow-x_total" is not a metric name`},
		{"repeat", "dagflow_x_total counter -\ndagflow_x_total counter -", "already listed on line 1"},
		{"type", "dagflow_x summary -", `unknown type "summary"`},
		{"counter suffix", "dagflow_x counter -", "a counter's name ends in _total"},
		{"gauge suffix", "dagflow_x_total gauge -", "only a counter's name ends in _total"},
		{"label name", "dagflow_x gauge a-b", `"a-b" is not a label name`},
		{"reserved label", "dagflow_x gauge __name", `"__name" is not a label name`},
		{"implicit label", "dagflow_x gauge queue,instance", `label "instance" is listed twice or is one every metric has`},
		{"twice", "dagflow_x gauge queue,queue", `label "queue" is listed twice`},
		{"le", "dagflow_x histogram le", `label "le"`},
		{"empty", "# nothing\n\n", "names no metric"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMetrics(tt.text)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseMetrics(%q): got error %v, want one containing %q", tt.text, err, tt.want)
			}
		})
	}
	got, err := ParseMetrics("# c\n a_total  counter  x,y \nb histogram -\n")
	if err != nil {
		t.Fatalf("ParseMetrics: %v", err)
	}
	want := []Metric{{Name: "a_total", Type: Counter, Labels: []string{"x", "y"}}, {Name: "b", Type: Histogram}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ParseMetrics: got %v, want %v", got, want)
	}
}

// TestCheckExpr shows that the expression check finds each kind of drift,
// and accepts what the rules and the dashboard write.
func TestCheckExpr(t *testing.T) {
	c := listed(t)
	good := []struct {
		expr string
		uses []string
	}{
		{`max by (queue) (dagflow_queue_depth) > 100 and max by (queue) (deriv(dagflow_queue_depth[15m])) > 0`,
			[]string{"dagflow_queue_depth", "dagflow_queue_depth"}},
		{`histogram_quantile(0.99, sum by (le, queue) (rate(dagflow_step_dispatch_seconds_bucket{queue=~"$queue"}[$__rate_interval])))`,
			[]string{"dagflow_step_dispatch_seconds"}},
		{`sum(rate(dagflow_run_duration_seconds_sum[5m])) / sum(rate(dagflow_run_duration_seconds_count[5m]))`,
			[]string{"dagflow_run_duration_seconds", "dagflow_run_duration_seconds"}},
		{`sum by (workflow) (rate(dagflow_runs_finished_total{status=~"failed|compensated", workflow=~"${workflow}"}[15m])) # a comment`,
			[]string{"dagflow_runs_finished_total"}},
		{`up{job="dagflow"} == 0`, []string{"up"}},
		{`sum without (job) (increase(dagflow_store_errors_total{instance!="n1:9090"}[1h] offset 5m))`, []string{"dagflow_store_errors_total"}},
		{`sum by (instance) (dagflow_worker_slots) * on (instance) group_left (node) dagflow_node_info`,
			[]string{"dagflow_worker_slots", "dagflow_node_info"}},
		{`max(max_over_time(dagflow_schedule_lag_seconds[[interval]]))`, []string{"dagflow_schedule_lag_seconds"}},
		{`absent(dagflow_runs_started_total)`, []string{"dagflow_runs_started_total"}},
		{`sum(rate(dagflow_steps_finished_total{status!="succeeded"}[5m])) by (workflow, step) > on (workflow) group_left sum by (workflow) (rate(dagflow_runs_started_total[5m]))`,
			[]string{"dagflow_steps_finished_total", "dagflow_runs_started_total"}},
	}
	for _, tt := range good {
		used, err := c.check(tt.expr)
		if err != nil {
			t.Errorf("check(%q): %v", tt.expr, err)
			continue
		}
		if !slices.Equal(used, tt.uses) {
			t.Errorf("check(%q): uses %v, want %v", tt.expr, used, tt.uses)
		}
	}
	bad := []struct{ expr, want string }{
		{`sum(rate(dagflow_runs_started[5m]))`, "unknown metric dagflow_runs_started"},
		{`max by (queue) (dagflow_queue_length)`, "unknown metric dagflow_queue_length"},
		{`sum(rate(dagflow_runs_started_total{workflow_name="x"}[5m]))`, "dagflow_runs_started_total has no label workflow_name"},
		{`sum by (le) (rate(dagflow_step_dispatch_seconds_sum[5m]))`, "grouping by le"},
		{`sum by (queue) (rate(dagflow_steps_finished_total[5m]))`, "grouping by queue"},
		{`sum by (node) (dagflow_worker_slots)`, "grouping by node"},
		{`dagflow_store_errors_total{node="n1"}`, "dagflow_store_errors_total has no label node"},
		{`histogram_quantile(0.99, rate(dagflow_step_duration_seconds[5m]))`, "histogram dagflow_step_duration_seconds is queried as"},
		{`dagflow_gauge_bucket`, "unknown metric dagflow_gauge_bucket"},
		{`dagflow_queue_depth_bucket`, "unknown metric dagflow_queue_depth_bucket"},
		{`sum by (workflow) (dagflow_runs_started_total)`, "only goes up: take its rate() or increase(), not sum() of it"},
		{`dagflow_runs_started_total > 5`, "only goes up: take its rate() or increase(), not its raw value"},
		{`max by (queue) (rate(dagflow_queue_oldest_age_seconds[5m]))`, "is a gauge: rate() of it"},
		{`sum(dagflow_store_errors_total)`, "not sum() of it"},
		{`rate(dagflow_queue_depth[5m])`, "dagflow_queue_depth is a gauge: rate() of it"},
		{`histogram_quantil(0.9, x)`, "unknown function histogram_quantil()"},
		{`{__name__="dagflow_queue_depth"}`, "a selector without a metric name"},
		{`dagflow_queue_depth{queue>"x"}`, `is not a matcher`},
		{`dagflow_queue_depth{queue="x"`, "unterminated {"},
		{`dagflow_queue_depth{queue=x}`, "want a quoted value"},
		{`max(dagflow_queue_depth`, "unbalanced ("},
		{`dagflow_queue_depth)`, "unbalanced )"},
		{`dagflow_queue_depth{queue="x}`, "unterminated string"},
		{`rate(dagflow_store_errors_total[5m)`, "unterminated ["},
		{`sum by (queue, "x") (dagflow_queue_depth)`, `"x" is not a label name`},
		{`dagflow_queue_depth ; 1`, `unexpected ';'`},
	}
	for _, tt := range bad {
		_, err := c.check(tt.expr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("check(%q): got error %v, want one containing %q", tt.expr, err, tt.want)
		}
	}
}

// rules is the shape of a Prometheus rules file.
type rules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleTests is the shape of a promtool rule test file, as far as it is read.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name  string `yaml:"name"`
		Cases []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// promDuration is a Prometheus duration such as 5m or 1h30m.
var promDuration = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)

// TestAlertRules checks each alert rule against metrics.txt and the
// conventions of this file: a for, a severity, a summary and a description
// with a "To do:" line.
func TestAlertRules(t *testing.T) {
	c := listed(t)
	var rf rules
	readYAML(t, alertsFile, &rf)
	seen := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if name == "" {
				t.Errorf("%s: group %s: a rule without alert (recording rule %q): this file holds alerts only", alertsFile, g.Name, r.Record)
				continue
			}
			if seen[name] {
				t.Errorf("%s: alert %s is defined twice", alertsFile, name)
			}
			seen[name] = true
			if !strings.HasPrefix(name, "Dagflow") {
				t.Errorf("%s: alert %s: names start with Dagflow", alertsFile, name)
			}
			if _, err := c.check(r.Expr); err != nil {
				t.Errorf("%s: alert %s: expr %q: %v", alertsFile, name, r.Expr, err)
			}
			if !promDuration.MatchString(r.For) || !strings.ContainsAny(r.For, "123456789") {
				t.Errorf("%s: alert %s: for %q: want a duration above zero such as 5m", alertsFile, name, r.For)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: alert %s: severity %q: want warning or critical", alertsFile, name, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: alert %s: no summary annotation", alertsFile, name)
			}
			if d := r.Annotations["description"]; !strings.Contains(d, "To do: ") {
				t.Errorf("%s: alert %s: description %q: want a line that says what to do (\"To do: ...\")", alertsFile, name, d)
			}
		}
	}
	for _, want := range []string{"DagflowQueueBacklogGrowing", "DagflowOldestTaskTooOld", "DagflowRunFailureRatioHigh",
		"DagflowDeadLettersRising", "DagflowNodeDown", "DagflowScheduleLagging"} {
		if !seen[want] {
			t.Errorf("%s: alert %s is missing", alertsFile, want)
		}
	}

	// Every alert is unit-tested, firing and not firing.
	var tf ruleTests
	readYAML(t, alertTestsFile, &tf)
	if !slices.Equal(tf.RuleFiles, []string{strings.TrimPrefix(alertsFile, "prometheus/")}) {
		t.Errorf("%s: rule_files %v: want [%s]", alertTestsFile, tf.RuleFiles, strings.TrimPrefix(alertsFile, "prometheus/"))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, cs := range tc.Cases {
			if !seen[cs.Alertname] {
				t.Errorf("%s: test %q: alert %s is not in %s", alertTestsFile, tc.Name, cs.Alertname, alertsFile)
			}
			if len(cs.ExpAlerts) > 0 {
				fires[cs.Alertname] = true
			} else {
				quiet[cs.Alertname] = true
			}
		}
	}
	for name := range seen {
		if !fires[name] {
			t.Errorf("%s: no test case in which %s fires", alertTestsFile, name)
		}
		if !quiet[name] {
			t.Errorf("%s: no test case in which %s stays quiet", alertTestsFile, name)
		}
	}
}

// panel is the part of a Grafana panel the test reads.
type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		RefID      string          `json:"refId"`
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Query      json.RawMessage `json:"query"`
			Datasource json.RawMessage `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

// usesDatasourceVar reports whether raw is {"type": "prometheus", "uid":
// "${datasource}"}: every query goes to the data source picked in the
// variable, so that the dashboard imports into any Grafana.
func usesDatasourceVar(raw json.RawMessage) bool {
	var ds struct{ Type, UID string }
	return json.Unmarshal(raw, &ds) == nil && ds.Type == "prometheus" && ds.UID == "${datasource}"
}

// labelValues is Grafana's label_values(SELECTOR, LABEL) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// TestDashboard checks that the dashboard parses, that every query and
// variable names only metrics and labels of metrics.txt and goes to the
// data source variable, and that it shows every listed metric.
func TestDashboard(t *testing.T) {
	c := listed(t)
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("%s: title %q, uid %q: want both", dashboardFile, d.Title, d.UID)
	}
	used := map[string]bool{}
	dsVar := false
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			var q string
			if json.Unmarshal(v.Query, &q) != nil || q != "prometheus" || v.Name != "datasource" {
				t.Errorf("%s: data source variable %q: query %s: want a variable named datasource of type prometheus", dashboardFile, v.Name, v.Query)
			}
			dsVar = true
		case "query":
			if !usesDatasourceVar(v.Datasource) {
				t.Errorf("%s: variable %s: datasource %s: want the ${datasource} variable", dashboardFile, v.Name, v.Datasource)
			}
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Errorf("%s: variable %s: query %s: %v", dashboardFile, v.Name, v.Query, err)
				continue
			}
			m := labelValues.FindStringSubmatch(q.Query)
			if m == nil {
				t.Errorf("%s: variable %s: query %q: want label_values(SELECTOR, LABEL)", dashboardFile, v.Name, q.Query)
				continue
			}
			// The selector's own rate or raw-value rule does not apply here:
			// label_values only reads its series' labels.
			r, err := scan(m[1])
			if err != nil || len(r.selectors) != 1 || len(r.functions) != 0 {
				t.Errorf("%s: variable %s: %q: want one metric selector (%v)", dashboardFile, v.Name, m[1], err)
				continue
			}
			s := r.selectors[0]
			mt, bucket, err := c.resolve(s.name)
			if err != nil {
				t.Errorf("%s: variable %s: %v", dashboardFile, v.Name, err)
				continue
			}
			for _, l := range append(s.labels, m[2]) {
				if !mt.HasLabel(l, bucket) {
					t.Errorf("%s: variable %s: %s has no label %s", dashboardFile, v.Name, s.name, l)
				}
			}
		default:
			t.Errorf("%s: variable %s: type %q: this test reads datasource and query variables only", dashboardFile, v.Name, v.Type)
		}
	}
	if !dsVar {
		t.Errorf("%s: no data source variable", dashboardFile)
	}

	ids := map[int]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, ok := ids[p.ID]; ok || p.ID == 0 {
				t.Errorf("%s: panel %q: id %d is missing or taken by %q", dashboardFile, p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			if p.Title == "" {
				t.Errorf("%s: panel %d has no title", dashboardFile, p.ID)
			}
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if !usesDatasourceVar(p.Datasource) {
				t.Errorf("%s: panel %q: datasource %s: want the ${datasource} variable", dashboardFile, p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
			}
			for _, tg := range p.Targets {
				if !usesDatasourceVar(tg.Datasource) {
					t.Errorf("%s: panel %q query %s: datasource %s: want the ${datasource} variable", dashboardFile, p.Title, tg.RefID, tg.Datasource)
				}
				names, err := c.check(tg.Expr)
				if err != nil {
					t.Errorf("%s: panel %q query %s %q: %v", dashboardFile, p.Title, tg.RefID, tg.Expr, err)
				}
				for _, n := range names {
					used[n] = true
				}
			}
		}
	}
	walk(d.Panels)
	for name := range c {
		if !used[name] {
			t.Errorf("%s: no panel shows %s", dashboardFile, name)
		}
	}
}
