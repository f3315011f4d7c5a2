package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
)

func toWorkflow(d engine.WorkflowDefinition) client.Workflow {
	return client.Workflow{
		Name:         d.Name,
		Version:      d.Version,
		Declared:     d.Declared,
		CreatedAt:    d.CreatedAt.UTC(),
		RegisteredAt: d.RegisteredAt.UTC(),
		Handlers:     d.Handlers,
	}
}

// listWorkflows lists the current version of every workflow: GET
// /v1/workflows.
func (s *server) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryValues(r); err != nil {
		return err
	}
	defs, err := s.e.Definitions(r.Context())
	if err != nil {
		return err
	}
	out := client.WorkflowList{Workflows: make([]client.Workflow, len(defs))}
	for i, d := range defs {
		out.Workflows[i] = toWorkflow(d)
	}
	return writeJSON(w, http.StatusOK, out)
}

// getWorkflow shows a workflow's current definition, graph and versions:
// GET /v1/workflows/{name}.
func (s *server) getWorkflow(w http.ResponseWriter, r *http.Request) error {
	name, err := workflowName(r, "name")
	if err != nil {
		return err
	}
	if _, err := queryValues(r); err != nil {
		return err
	}
	versions, err := s.e.DefinitionVersions(r.Context(), name)
	if err != nil {
		return err
	}
	if len(versions) == 0 {
		return problemf(http.StatusNotFound, CodeWorkflowNotFound, "workflow %q is not known", name)
	}
	cur := versions[0]
	def, err := json.Marshal(cur.Definition)
	if err != nil {
		return err
	}
	g := cur.Definition.Graph()
	out := client.WorkflowDetail{
		Workflow:   toWorkflow(cur),
		Definition: def,
		Graph:      client.Graph{Nodes: make([]client.GraphNode, len(g.Nodes)), Edges: make([]client.GraphEdge, len(g.Edges))},
		Mermaid:    cur.Definition.Mermaid(),
		Versions:   make([]client.Workflow, len(versions)),
	}
	for i, n := range g.Nodes {
		out.Graph.Nodes[i] = client.GraphNode(n)
	}
	for i, e := range g.Edges {
		out.Graph.Edges[i] = client.GraphEdge(e)
	}
	for i, v := range versions {
		out.Versions[i] = toWorkflow(v)
	}
	return writeJSON(w, http.StatusOK, out)
}

// maxQueueVersions bounds how many stored versions of one workflow the
// queue listing reads: the newest ones (a workflow with more has had runs
// of its old versions finished long ago, or the listing would be slow).
const maxQueueVersions = 100

// definitionQueues adds to set the queues of every stored version of
// every workflow (up to maxQueueVersions each, newest first): a run
// follows the version it started with, so an old version's queue may
// still hold its steps.
func (s *server) definitionQueues(ctx context.Context, set map[string]bool) error {
	defs, err := s.e.Definitions(ctx)
	if err != nil {
		return err
	}
	for _, d := range defs {
		versions, err := s.e.DefinitionVersions(ctx, d.Name)
		if err != nil {
			return err
		}
		if len(versions) > maxQueueVersions {
			versions = versions[:maxQueueVersions]
		}
		for _, v := range versions {
			for _, st := range v.Definition.Steps {
				set[st.Queue] = true
			}
		}
	}
	return nil
}
