package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// TestWorkerRegistersOnlyWhatItIsGiven: a worker started without
// --workflows or --demo registers no workflow (the example order
// workflow and its stand-in services are the demo's, not production's);
// with --demo it registers the order workflow.
func TestWorkerRegistersOnlyWhatItIsGiven(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)

	info := workerNodeInfo(t, ctx, env)
	if len(info.Workflows) != 0 || len(info.Queues) != 0 {
		t.Errorf("a worker given no workflow registered %v on queues %v; want none", info.Workflows, info.Queues)
	}
	defs, err := env.store.DefinitionList(ctx, persistence.DefinitionListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		t.Errorf("a worker given no workflow stored the definition of %q; want none", d.Workflow)
	}

	info = workerNodeInfo(t, ctx, env, "--demo")
	if _, ok := info.Workflows["order"]; !ok {
		t.Errorf("worker --demo registered %v; want the order workflow", info.Workflows)
	}
}

// workerNodeInfo runs `dagflow worker` with args until it says it runs
// and its node is in the registry, stops it, and returns what the node said of itself.
func workerNodeInfo(t *testing.T, ctx context.Context, env *serveEnv, args ...string) engine.NodeInfo {
	t.Helper()
	before := map[string]bool{}
	nodes, err := env.store.NodeList(ctx, persistence.NodeListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		before[n.ID] = true
	}
	wctx, stop := context.WithCancel(ctx)
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(wctx, append(append([]string{"worker"}, args...), env.flags...), &out, &errb)
	}()
	var info engine.NodeInfo
	testenv.Eventually(t, 30*time.Second, func() bool {
		select {
		case <-done:
			t.Fatalf("worker %v exited early:\n%s\n%s", args, &out, &errb)
		default:
		}
		if !strings.Contains(out.String(), " running ") {
			return false
		}
		nodes, err := env.store.NodeList(ctx, persistence.NodeListParams{})
		if err != nil {
			return false
		}
		for _, n := range nodes {
			if !before[n.ID] {
				return json.Unmarshal(n.Info, &info) == nil
			}
		}
		return false
	}, "worker %v did not join the node registry; stdout %s, stderr %s", args, &out, &errb)
	stop()
	if code := <-done; code != 0 {
		t.Errorf("worker %v exited %d:\n%s", args, code, &errb)
	}
	return info
}
