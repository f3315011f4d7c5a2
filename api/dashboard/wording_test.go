package dashboard_test

import (
	"context"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
)

// queueRowRE matches a queues page row: its name and its "Next task"
// cell.
var queueRowRE = regexp.MustCompile(`<tr><td>([^<]+)</td><td class="num">\d+</td><td class="num">\d+</td><td class="num">\d+</td><td class="num">[^<]*</td><td>(.*?)</td>`)

// TestQueuesPageEmptyNextTask: a queue with no ready task shows "—" as
// its next task, not an empty code box; a queue with one shows its id.
func TestQueuesPageEmptyNextTask(t *testing.T) {
	eachBackend(t, func(t *testing.T, real bool) {
		e := newEnv(t, envOptions{real: real})
		b := e.browser(t)
		page := b.get("/queues")
		rows := queueRowRE.FindAllStringSubmatch(page.body, -1)
		if len(rows) == 0 {
			t.Fatalf("the queues page has no queue row:\n%s", page.body)
		}
		for _, r := range rows {
			if r[1] == "default" && r[2] != "—" {
				t.Errorf("the idle default queue's next task cell is %q, want —", r[2])
			}
		}
		if strings.Contains(page.body, "<code></code>") {
			t.Error("the queues page has an empty <code>")
		}
	})
}

// TestNodesPageShowsVersion: the nodes page has the Version column the
// CLI's `dagflow nodes` has, with each node's binary version.
func TestNodesPageShowsVersion(t *testing.T) {
	eachBackend(t, func(t *testing.T, real bool) {
		e := newEnv(t, envOptions{real: real})
		nodes, err := e.Engine.AllNodes(context.Background())
		if err != nil || len(nodes) == 0 || nodes[0].Version == "" {
			t.Fatalf("the engine's node: %+v, %v", nodes, err)
		}
		page := e.browser(t).get("/nodes")
		if !strings.Contains(page.body, `<th scope="col">Version</th>`) {
			t.Errorf("the nodes page has no Version column:\n%s", page.body)
		}
		if !strings.Contains(page.body, "<td><code>"+html.EscapeString(nodes[0].Version)+"</code></td>") {
			t.Errorf("the nodes page does not show node %s's version %q:\n%s", nodes[0].ID, nodes[0].Version, page.body)
		}
	})
}

// TestWorkflowPagesPlainWords: the workflows list and a workflow's page
// say "Version" and "Runs on this node", not "Declared" and "Handlers
// here".
func TestWorkflowPagesPlainWords(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.browser(t)
	list, one := b.get("/workflows").body, b.get("/workflows/shop").body
	for name, body := range map[string]string{"/workflows": list, "/workflows/shop": one} {
		for _, old := range []string{"Declared", "declared", "Handlers here", "handlers registered here"} {
			if strings.Contains(body, old) {
				t.Errorf("%s still says %q", name, old)
			}
		}
	}
	if !strings.Contains(list, `<th scope="col">Runs on this node</th>`) || !strings.Contains(list, `<th scope="col" class="num">Version</th>`) ||
		!strings.Contains(list, `<th scope="col">Plan hash</th>`) {
		t.Errorf("the workflows list lacks the Version, Plan hash and Runs on this node columns:\n%s", list)
	}
	if !regexp.MustCompile(`version \d+ · plan <code>[0-9a-f]+</code> · runs on this node`).MatchString(one) {
		t.Errorf("the workflow page's graph heading does not say its version, plan and that it runs here:\n%s", one)
	}
}

// TestWhyWaitingNoNodeOnce: a step no live node can run says why once,
// not in two paragraphs.
func TestWhyWaitingNoNodeOnce(t *testing.T) {
	e := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{shopWorkflow(t)}, Clock: engine.SystemClock,
		Configure: func(c *engine.Config) { c.NoWorkers = true; c.NodeHeartbeat = 200 * time.Millisecond }})
	env := &env{Env: e}
	env.direct(t)
	id := e.Trigger(t, "shop", map[string]string{})
	b := env.browser(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := b.get("/runs/" + id + "?step=a")
		if why := regexp.MustCompile(`(?s)<div class="why" id="why">.*?</div>`).FindString(a.body); strings.Contains(why, "shop/a") {
			low := strings.ToLower(why)
			if n := strings.Count(low, "no live node"); n != 1 {
				t.Errorf("the why box says \"no live node\" %d times, want once:\n%s", n, why)
			}
			if n := strings.Count(low, "registered"); n != 1 {
				t.Errorf("the why box says \"registered\" %d times, want once:\n%s", n, why)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run page does not say that no node can run step a:\n%s", a.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
