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
// an alert. The engine's metrics are held to the same list.
package deploy
