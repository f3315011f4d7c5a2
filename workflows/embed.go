// Package workflows holds dagflow's bundled YAML workflow definitions,
// embedded in the binary so that `dagflow dev` can load them with
// dag.LoadFS(workflows.FS, reg). The files name handlers; the registry
// passed to the loader supplies them (for order.yaml: order.reserve,
// order.release, order.notify, order.points, order.revoke_points and
// order.ship, registered by the order example's services).
//
// order.yaml is the order workflow: reserve, then notify and points (only
// when input.total >= 100) in parallel, then ship; reserve and points have
// compensations. It is the YAML twin of the Go declaration shown in the
// README, and a test checks that both give the same plan.
package workflows

import "embed"

// FS holds every *.yaml file of this directory, one workflow per file.
//
//go:embed *.yaml
var FS embed.FS
