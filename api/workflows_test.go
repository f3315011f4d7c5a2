package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
)

func TestWorkflows(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{})
		ctx := context.Background()
		c := env.anon
		wfs, err := c.ListWorkflows(ctx)
		if err != nil || len(wfs) != 1 {
			t.Fatalf("workflows = %+v, %v", wfs, err)
		}
		want := env.Engine.Workflow("order").Definition()
		if w := wfs[0]; w.Name != "order" || w.Version != want.Hash() || w.Declared != 1 || !w.Handlers {
			t.Fatalf("workflow %+v, want order at %s with handlers", w, want.Hash())
		}
		d, err := c.GetWorkflow(ctx, "order")
		if err != nil {
			t.Fatal(err)
		}
		if d.Name != "order" || d.Version != want.Hash() || len(d.Versions) == 0 || d.Versions[0].Version != want.Hash() {
			t.Fatalf("detail %+v", d)
		}
		var def struct {
			Steps []struct {
				Name  string   `json:"name"`
				Deps  []string `json:"deps"`
				Queue string   `json:"queue"`
			} `json:"steps"`
		}
		if err := json.Unmarshal(d.Definition, &def); err != nil || len(def.Steps) != 3 || def.Steps[2].Queue != "shipping" {
			t.Fatalf("definition %s: %v", d.Definition, err)
		}
		wantGraph := client.Graph{
			Nodes: []client.GraphNode{{ID: "reserve", Queue: "default"}, {ID: "charge", Queue: "default"}, {ID: "ship", Queue: "shipping"}},
			Edges: []client.GraphEdge{{From: "reserve", To: "charge", Kind: "after"}, {From: "charge", To: "ship", Kind: "after"}},
		}
		gotGraph, _ := json.Marshal(d.Graph)
		wantJSON, _ := json.Marshal(wantGraph)
		if string(gotGraph) != string(wantJSON) {
			t.Fatalf("graph %s, want %s", gotGraph, wantJSON)
		}
		if !strings.HasPrefix(d.Mermaid, "flowchart") || !strings.Contains(d.Mermaid, "reserve") || !strings.Contains(d.Mermaid, "ship") {
			t.Fatalf("mermaid %q", d.Mermaid)
		}
		env.raw(t, "GET", "/v1/workflows/nope", "").problem(t, 404, api.CodeWorkflowNotFound)
		env.raw(t, "GET", "/v1/workflows/9x", "").problem(t, 400, api.CodeInvalidName)
		_, err = c.GetWorkflow(ctx, "nope")
		problemOf(t, err, 404, api.CodeWorkflowNotFound)
	})
}
