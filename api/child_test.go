package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

// TestRunParentAndChildren: GET /v1/runs/{id} of a parent lists its
// child runs, and the child's names its parent run and step; both answers
// are checked against the spec.
func TestRunParentAndChildren(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		parent, err := dag.New("order").Step("pay", nil, dag.Child("payment")).Build()
		if err != nil {
			t.Fatal(err)
		}
		child, err := dag.New("payment").Step("charge", steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
			return sc.Input, nil
		})).Build()
		if err != nil {
			t.Fatal(err)
		}
		env := newAPIEnv(t, b, envOptions{workflows: []*dag.Workflow{parent, child}})
		id := env.Trigger(t, "order", map[string]any{"total": 3})
		env.waitStatus(t, id, "succeeded")
		var d client.RunDetail
		env.raw(t, "GET", "/v1/runs/"+id, "").decode(t, http.StatusOK, &d)
		if d.Parent != nil || len(d.Children) != 1 || d.Children[0].Step != "pay" || d.Children[0].Workflow != "payment" ||
			d.Children[0].Status != "succeeded" {
			t.Fatalf("parent's detail: parent %+v, children %+v", d.Parent, d.Children)
		}
		var c client.RunDetail
		env.raw(t, "GET", "/v1/runs/"+d.Children[0].RunID, "").decode(t, http.StatusOK, &c)
		if c.Parent == nil || c.Parent.RunID != id || c.Parent.Step != "pay" || len(c.Children) != 0 {
			t.Errorf("child's detail: parent %+v, children %+v", c.Parent, c.Children)
		}
	})
}
