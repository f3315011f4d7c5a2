package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The dashboard's queries evaluated by promtool against a scrape of two
// nodes: every query must answer, and a panel that shows something per
// node must answer one series for each of them. A query grouping by a
// label the nodes do not export merges them into one line, which no
// static check of the query text notices.

// scrapeNodes are the scraped nodes: instance is the address Prometheus
// scrapes, node the engine's node id (in dagflow_node_info). The third is
// a node on an older binary, from before dagflow_node_info, as in a
// rolling upgrade: its line must not vanish from the per-node panels.
var scrapeNodes = []struct{ instance, node string }{
	{"n1:9090", "n1"},
	{"n2:9090", "n2"},
	{"n3:9090", ""},
}

const (
	scrapeJob      = "dagflow"
	scrapeSamples  = 31 // one a minute, so the queries' 5m windows are full
	scrapeEvalTime = "20m"
)

// labelSamples are the values each label of metrics.txt takes in the
// scrape: the cross product of a metric's labels' values is its series.
var labelSamples = map[string][]string{
	"workflow": {"order"},
	"step":     {"reserve"},
	"status":   {"succeeded", "failed"},
	"queue":    {"default"},
	"schedule": {"nightly"},
	"state":    {"busy", "free"},
	"reason":   {"queued", "lease_expired"},
	"version":  {"dagflow test"},
}

// dashboardVars are the values the dashboard's variables take: the scrape
// job, and All for the multi-value ones.
var dashboardVars = map[string]string{
	"job":             scrapeJob,
	"workflow":        ".*",
	"queue":           ".*",
	"__rate_interval": "5m",
	"__interval":      "1m",
	"__range":         scrapeEvalTime,
}

var grafanaVar = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)\}|\$([a-zA-Z_][a-zA-Z0-9_]*)|\[\[([a-zA-Z_][a-zA-Z0-9_]*)\]\]`)

// substitute replaces the Grafana variables of expr as Grafana would with
// dashboardVars; it refuses a variable it has no value for.
func substitute(expr string) (string, error) {
	var unknown []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		m := grafanaVar.FindStringSubmatch(v)
		name := m[1] + m[2] + m[3]
		val, ok := dashboardVars[name]
		if !ok {
			unknown = append(unknown, name)
		}
		return val
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("variables %v have no test value", unknown)
	}
	return out, nil
}

// seriesLabels returns the label sets of m's series on one node: the
// cross product of its labels' sample values.
func seriesLabels(t *testing.T, m Metric, node string) [][]string {
	t.Helper()
	sets := [][]string{nil}
	for _, l := range m.Labels {
		vals := labelSamples[l]
		if l == "node" {
			vals = []string{node}
		}
		if len(vals) == 0 {
			t.Fatalf("metrics.txt: %s: label %s has no sample value in this test", m.Name, l)
		}
		var next [][]string
		for _, s := range sets {
			for _, v := range vals {
				next = append(next, append(slices.Clone(s), fmt.Sprintf("%s=%q", l, v)))
			}
		}
		sets = next
	}
	return sets
}

// ruleSeries is one input series of a promtool rule test.
type ruleSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// scrapeSeries makes the input series of every metric of metrics.txt on
// every scrape node: counters grow, at a rate of their own on each node;
// gauges hold a value of their own on each; a histogram has three buckets.
func scrapeSeries(t *testing.T, ms []Metric) []ruleSeries {
	var out []ruleSeries
	for i, n := range scrapeNodes {
		k := i + 1 // the node's own rate and value
		for _, m := range ms {
			for _, ls := range seriesLabels(t, m, n.node) {
				ls = append(ls, fmt.Sprintf("job=%q", scrapeJob), fmt.Sprintf("instance=%q", n.instance))
				add := func(name string, values string, extra ...string) {
					all := append(slices.Clone(ls), extra...)
					out = append(out, ruleSeries{name + "{" + strings.Join(all, ", ") + "}", values})
				}
				grow := func(per int) string { return fmt.Sprintf("0+%dx%d", per, scrapeSamples-1) }
				hold := func(v int) string { return fmt.Sprintf("%dx%d", v, scrapeSamples-1) }
				switch {
				case m.Name == "dagflow_node_info" && n.node == "":
					// an older binary has no info series
				case m.Name == "up" || m.Name == "dagflow_node_info":
					add(m.Name, hold(1))
				case m.Type == Counter:
					add(m.Name, grow(k*6))
				case m.Type == Gauge:
					add(m.Name, hold(k*10))
				case m.Type == Histogram:
					for j, le := range []string{"0.1", "1", "+Inf"} {
						add(m.Name+"_bucket", grow(k*(j+1)*6), fmt.Sprintf("le=%q", le))
					}
					add(m.Name+"_count", grow(k*18))
					add(m.Name+"_sum", grow(k*9))
				}
			}
		}
	}
	return out
}

// panelQuery is one query of one panel, its variables substituted.
type panelQuery struct {
	panel, ref, expr string
	perNode          bool // the panel shows one line per node
}

// panelQueries reads every panel's queries from the dashboard. A panel is
// per node when its title says "by node" or a query groups by node or
// instance.
func panelQueries(t *testing.T) []panelQuery {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []panelQuery
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			perNode := strings.Contains(strings.ToLower(p.Title), "by node")
			var qs []panelQuery
			for _, tg := range p.Targets {
				expr, err := substitute(tg.Expr)
				if err != nil {
					t.Fatalf("%s: panel %q query %s: %v", dashboardFile, p.Title, tg.RefID, err)
				}
				r, err := scan(expr)
				if err != nil {
					t.Fatalf("%s: panel %q query %s %q: %v", dashboardFile, p.Title, tg.RefID, expr, err)
				}
				perNode = perNode || slices.Contains(r.grouping, "node") || slices.Contains(r.grouping, "instance")
				qs = append(qs, panelQuery{panel: p.Title, ref: tg.RefID, expr: expr})
			}
			for _, q := range qs {
				q.perNode = perNode
				out = append(out, q)
			}
		}
	}
	walk(d.Panels)
	return out
}

// exprTest is a promql_expr_test of a promtool rule test.
type exprTest struct {
	Expr       string `yaml:"expr"`
	EvalTime   string `yaml:"eval_time"`
	ExpSamples []struct {
		Labels string  `yaml:"labels"`
		Value  float64 `yaml:"value"`
	} `yaml:"exp_samples"`
}

// newExprTest asks that expr answer the given label sets, each with value.
func newExprTest(expr string, value float64, labels ...string) exprTest {
	et := exprTest{Expr: expr, EvalTime: scrapeEvalTime}
	for _, l := range labels {
		et.ExpSamples = append(et.ExpSamples, struct {
			Labels string  `yaml:"labels"`
			Value  float64 `yaml:"value"`
		}{l, value})
	}
	return et
}

// panelTests are the promtool expression tests of the dashboard's queries:
// each query answers at least one series; a per-node panel's query answers
// exactly one series for each scrape node, named by its instance and its
// node id, or by its instance alone for a node without dagflow_node_info.
func panelTests(qs []panelQuery) []exprTest {
	var out []exprTest
	for _, q := range qs {
		out = append(out, newExprTest(fmt.Sprintf("count(%s) > bool 0", q.expr), 1, "{}"))
		if !q.perNode {
			continue
		}
		var each []string
		for _, n := range scrapeNodes {
			if n.node == "" {
				each = append(each, fmt.Sprintf("{instance=%q}", n.instance))
				continue
			}
			each = append(each, fmt.Sprintf("{instance=%q, node=%q}", n.instance, n.node))
		}
		out = append(out, newExprTest(fmt.Sprintf("count by (instance, node) (%s)", q.expr), 1, each...))
	}
	return out
}

// promtool finds promtool ($PROMTOOL, else on PATH). Without it the test
// is skipped with a message, except with CI=true, as in make test-rules.
func promtool(t *testing.T) string {
	t.Helper()
	name := os.Getenv("PROMTOOL")
	if name == "" {
		name = "promtool"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (Debian's prometheus package): CI must evaluate the dashboard's queries", name)
		}
		t.Skipf("%s not found, the dashboard's queries are not evaluated (apt-get install prometheus)", name)
	}
	return path
}

// TestDashboardQueriesOnTwoNodes evaluates every panel's query with
// promtool against two scraped nodes and one of an older binary: each
// answers, and each per-node panel shows one line per node.
func TestDashboardQueriesOnTwoNodes(t *testing.T) {
	tool := promtool(t)
	ms, err := Metrics()
	if err != nil {
		t.Fatalf("metrics.txt: %v", err)
	}
	qs := panelQueries(t)
	perNode := 0
	for _, q := range qs {
		if q.perNode {
			perNode++
		}
	}
	if perNode == 0 {
		t.Fatalf("%s: no panel shows a line per node", dashboardFile)
	}
	file := map[string]any{
		"evaluation_interval": "1m",
		"tests": []map[string]any{{
			"interval":         "1m",
			"input_series":     scrapeSeries(t, ms),
			"promql_expr_test": panelTests(qs),
			"name":             "dashboard on two nodes",
		}},
	}
	b, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard.test.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tool, "test", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules of the dashboard's %d queries (%d in per-node panels): %v\n%s", len(qs), perNode, err, out)
	}
}
