// Package deploy holds dagflow's operations files and the list they are
// built on:
//
//   - metrics.txt: every metric dagflow exports, with its type and labels,
//     read by [Metrics];
//   - prometheus/dagflow-alerts.yml: the alert rules, unit-tested by
//     prometheus/dagflow-alerts.test.yml (`promtool test rules`, in
//     `make test`);
//   - grafana/dagflow-dashboard.json: the Grafana dashboard.
//
// The package's tests hold the rules and the dashboard to metrics.txt:
// every expression may name only the metrics and labels listed there, so a
// renamed metric fails a test here instead of silently emptying a panel or
// an alert. They also hold the metric lists of the README and
// docs/observability.md to it, and the engine's tests can hold the metrics
// it registers to it with [Metrics]. And they evaluate every panel's query
// with `promtool test rules` against a scrape of two nodes made from
// metrics.txt: each query answers, and each by-node panel draws one line
// per node (skipped without promtool, unless CI=true, as make test-rules).
package deploy
