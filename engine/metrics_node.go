package engine

import "github.com/prometheus/client_golang/prometheus"

// nodeInfo is dagflow_node_info: one series, always 1, whose labels name
// this node (its NodeID) and its binary (the version `dagflow nodes`
// shows). The other metrics carry no node label, so that a restarted
// node, which gets a new id, does not start new series of every metric;
// Prometheus tells the scraped processes apart by instance, and a query
// joins the node id where it wants it:
//
//	sum by (instance) (rate(dagflow_store_errors_total[5m]))
//	  * on (instance) group_left (node) dagflow_node_info
//
// One process exports one series, so the labels' cardinality is the
// number of live processes.
func nodeInfo(nodeID string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "dagflow_node_info",
		Help:        "Always 1; its labels are this process's engine node id (node) and binary (version), joined on instance to name a node in other metrics.",
		ConstLabels: prometheus.Labels{"node": nodeID, "version": processVersion()},
	}, func() float64 { return 1 })
}
