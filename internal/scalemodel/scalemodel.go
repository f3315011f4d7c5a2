// Package scalemodel is a small capacity model of a dagflow deployment:
// fed with the CPU seconds one step costs in each tier (measured by
// `dagflow bench --procs`, see docs/scaling.md), it predicts the steps/s
// a machine gives and the servers a target rate needs.
//
// Engine processes are stateless, so they scale out by adding machines.
// A Redis server runs its commands on one thread, so each Redis Cluster
// master gives at most one core; queues spread over masters by their hash
// tags. The MySQL primary takes every transaction, so the rate one
// primary can carry is its cores divided by MySQL's cost per step; past
// that the store must spread over several (TiDB, or Vitess-style
// sharding by run id).
//
// The model is linear in CPU and knows nothing of lock waits, network
// round trips or batch sizes: it holds while the tiers are CPU-bound and
// the batches are as large as where the costs were measured. The
// package's test checks it against the 1, 2 and 4 process measurements.
package scalemodel

import (
	"fmt"
	"math"
)

// Costs are CPU seconds per step in each tier.
type Costs struct {
	// Engine is the engine processes together: workers, and the
	// processes that trigger runs.
	Engine float64
	// EngineProcess is the CPU (in cores) each engine process uses
	// besides its steps: its loops, heartbeats, reconciler and runtime.
	EngineProcess float64
	// Redis is every Redis server together.
	Redis float64
	// MySQL is the MySQL server.
	MySQL float64
}

// Total is the CPU seconds per step of all tiers (without the engine
// processes' own overhead).
func (c Costs) Total() float64 { return c.Engine + c.Redis + c.MySQL }

// Hardware is what the deployment is planned on. Zero values mean the
// defaults noted on each field.
type Hardware struct {
	// EngineCores are the cores of one engine machine (default 8).
	EngineCores float64
	// MySQLCores are the cores of the largest MySQL primary one would run
	// (default 64).
	MySQLCores float64
	// Utilization is the share of every core planned to be busy, leaving
	// headroom for bursts (default 0.6).
	Utilization float64
}

func (h Hardware) withDefaults() Hardware {
	if h.EngineCores == 0 {
		h.EngineCores = 8
	}
	if h.MySQLCores == 0 {
		h.MySQLCores = 64
	}
	if h.Utilization == 0 {
		h.Utilization = 0.6
	}
	return h
}

// Plan is what a target rate needs.
type Plan struct {
	StepsPerS float64
	// EngineCores and EngineMachines: CPU for the engine processes.
	EngineCores    float64
	EngineMachines int
	// RedisMasters are the Redis Cluster masters (one core each); the
	// queues must be at least as many, spread over them.
	RedisMasters int
	// MySQLCores is the CPU the store needs; MySQLPrimaries how many of
	// Hardware.MySQLCores that takes: more than one means past one
	// primary.
	MySQLCores     float64
	MySQLPrimaries int
	// Wall is the tier whose single unit runs out first as the rate grows
	// ("mysql" or "redis"), and WallStepsPerS the rate where it does.
	Wall          string
	WallStepsPerS float64
}

// For returns what stepsPerS steps per second need with costs c on
// hardware h.
func For(c Costs, stepsPerS float64, h Hardware) (Plan, error) {
	if c.Engine <= 0 || c.Redis <= 0 || c.MySQL <= 0 {
		return Plan{}, fmt.Errorf("scalemodel: costs %+v: every tier's cost must be positive", c)
	}
	if stepsPerS <= 0 {
		return Plan{}, fmt.Errorf("scalemodel: %v steps/s: must be positive", stepsPerS)
	}
	h = h.withDefaults()
	if h.Utilization > 1 || h.Utilization < 0 {
		return Plan{}, fmt.Errorf("scalemodel: utilization %v: must be in (0, 1]", h.Utilization)
	}
	p := Plan{StepsPerS: stepsPerS}
	// One engine process per machine; its overhead comes off each.
	perMachine := h.EngineCores - c.EngineProcess/h.Utilization
	if perMachine <= 0 {
		return Plan{}, fmt.Errorf("scalemodel: an engine process's overhead (%v cores) fills a %v-core machine", c.EngineProcess, h.EngineCores)
	}
	p.EngineMachines = ceil(stepsPerS * c.Engine / h.Utilization / perMachine)
	p.EngineCores = stepsPerS*c.Engine/h.Utilization + float64(p.EngineMachines)*c.EngineProcess/h.Utilization
	p.RedisMasters = max(ceil(stepsPerS*c.Redis/h.Utilization), 1)
	p.MySQLCores = stepsPerS * c.MySQL / h.Utilization
	p.MySQLPrimaries = ceil(p.MySQLCores / h.MySQLCores)
	redisWall := h.Utilization / c.Redis
	mysqlWall := h.MySQLCores * h.Utilization / c.MySQL
	p.Wall, p.WallStepsPerS = "mysql", mysqlWall
	if redisWall < mysqlWall {
		p.Wall, p.WallStepsPerS = "redis", redisWall
	}
	return p, nil
}

// OnOneMachine predicts the steps/s when procs engine processes and both
// servers share cores cores that they keep busy: the CPU left after the
// processes' overhead, divided by what a step costs in all tiers.
func OnOneMachine(c Costs, cores float64, procs int) float64 {
	return max(cores-float64(procs)*c.EngineProcess, 0) / c.Total()
}

func ceil(x float64) int { return int(math.Ceil(x - 1e-9)) }
