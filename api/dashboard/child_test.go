package dashboard_test

import (
	"strings"
	"testing"

	"github.com/dagflow/dagflow/dag"
)

// TestRunPageLinksParentAndChildren: a parent's run page links to its
// child run, and the child's to its parent's step.
func TestRunPageLinksParentAndChildren(t *testing.T) {
	order, err := dag.New("order").Step("pay", nil, dag.Child("shop")).Build()
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, envOptions{wfs: []*dag.Workflow{order, shopWorkflow(t)}})
	id := env.Trigger(t, "order", map[string]string{})
	info := env.waitRun(t, id)
	if len(info.Children) != 1 {
		t.Fatalf("run %s has children %+v, want one", id, info.Children)
	}
	child := info.Children[0].RunID
	b := env.browser(t)
	if a := b.get("/runs/" + id); !strings.Contains(a.body, `id="run-children"`) || !strings.Contains(a.body, "/runs/"+child+`"`) {
		t.Errorf("the parent's page does not link to child %s:\n%s", child, a.body)
	}
	if a := b.get("/runs/" + child); !strings.Contains(a.body, `id="run-parent"`) || !strings.Contains(a.body, "/runs/"+id+"?step=pay#step") {
		t.Errorf("the child's page does not link to its parent %s:\n%s", id, a.body)
	}
}
