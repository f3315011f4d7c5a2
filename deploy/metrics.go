package deploy

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

// metricsTxt is metrics.txt, the list of the metrics dagflow exports.
//
//go:embed metrics.txt
var metricsTxt string

// Type is a metric's Prometheus type.
type Type string

// The metric types metrics.txt may name.
const (
	// Counter only goes up (and back to zero when its process restarts); its
	// name ends in _total.
	Counter Type = "counter"
	// Gauge goes up and down.
	Gauge Type = "gauge"
	// Histogram counts observations in buckets; it is queried as
	// NAME_bucket (with the label le), NAME_sum and NAME_count.
	Histogram Type = "histogram"
)

// ImplicitLabels may be on every metric besides its own labels: job and
// instance, which Prometheus adds to every scraped series. instance tells
// the nodes apart; the engine node's id is a label of dagflow_node_info
// only, joined on instance.
var ImplicitLabels = []string{"job", "instance"}

// Metric is one line of metrics.txt.
type Metric struct {
	// Name is the metric's name, such as dagflow_runs_started_total.
	Name string
	// Type is counter, gauge or histogram.
	Type Type
	// Labels are the metric's own labels in their listed order, without
	// [ImplicitLabels] and without a histogram's le.
	Labels []string
}

// HasLabel reports whether a series of m may carry the label: one of its
// own, one of [ImplicitLabels], or le on a histogram's buckets (bucket
// tells whether the series is NAME_bucket).
func (m Metric) HasLabel(label string, bucket bool) bool {
	if bucket && label == "le" {
		return true
	}
	for _, l := range m.Labels {
		if l == label {
			return true
		}
	}
	for _, l := range ImplicitLabels {
		if l == label {
			return true
		}
	}
	return false
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// Metrics returns the metrics of metrics.txt in their listed order.
func Metrics() ([]Metric, error) {
	return ParseMetrics(metricsTxt)
}

// ParseMetrics reads a list in the format of metrics.txt: one metric a
// line as NAME TYPE LABELS, LABELS comma-separated or - for none; blank
// lines and lines starting with # are skipped. It refuses a line that is
// malformed, a name or label that Prometheus would not accept, a type
// other than counter, gauge or histogram, a counter whose name does not
// end in _total (or another metric's that does), a repeated metric or
// label, and a label listed that every metric has anyway (job, instance,
// le).
func ParseMetrics(text string) ([]Metric, error) {
	var out []Metric
	seen := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("deploy: metrics line %d: %q: want NAME TYPE LABELS (LABELS: a,b or -), got %d fields", n, line, len(f))
		}
		m := Metric{Name: f[0], Type: Type(f[1])}
		if !metricName.MatchString(m.Name) {
			return nil, fmt.Errorf("deploy: metrics line %d: %q is not a metric name (want %s)", n, m.Name, metricName)
		}
		if prev, ok := seen[m.Name]; ok {
			return nil, fmt.Errorf("deploy: metrics line %d: %q is already listed on line %d", n, m.Name, prev)
		}
		seen[m.Name] = n
		switch m.Type {
		case Counter:
			if !strings.HasSuffix(m.Name, "_total") {
				return nil, fmt.Errorf("deploy: metrics line %d: counter %q: a counter's name ends in _total", n, m.Name)
			}
		case Gauge, Histogram:
			if strings.HasSuffix(m.Name, "_total") {
				return nil, fmt.Errorf("deploy: metrics line %d: %s %q: only a counter's name ends in _total", n, m.Type, m.Name)
			}
		default:
			return nil, fmt.Errorf("deploy: metrics line %d: %q: unknown type %q (want counter, gauge or histogram)", n, m.Name, f[1])
		}
		if f[2] != "-" {
			for _, l := range strings.Split(f[2], ",") {
				switch {
				case !labelName.MatchString(l) || strings.HasPrefix(l, "__"):
					return nil, fmt.Errorf("deploy: metrics line %d: %q: %q is not a label name (want %s, not starting with __)", n, m.Name, l, labelName)
				case l == "le" || m.HasLabel(l, false):
					return nil, fmt.Errorf("deploy: metrics line %d: %q: label %q is listed twice or is one every metric has (%s, le)", n, m.Name, l, strings.Join(ImplicitLabels, ", "))
				}
				m.Labels = append(m.Labels, l)
			}
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("deploy: the metrics list names no metric")
	}
	return out, nil
}
