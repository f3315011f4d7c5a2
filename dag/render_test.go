package dag_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
)

func TestMermaid(t *testing.T) {
	w, err := orderWorkflow().Build()
	if err != nil {
		t.Fatal(err)
	}
	want := `flowchart TD
    reserve["reserve"]
    notify["notify"]
    points["points<br/>when: input.total #gt;= 100"]
    ship["ship"]
    reserve --> notify
    reserve --> points
    reserve ==> ship
    notify --> ship
    points --> ship
`
	if diff := cmp.Diff(want, w.Mermaid()); diff != "" {
		t.Errorf("Mermaid() mismatch (-want +got):\n%s", diff)
	}
}

func TestMermaidUnsafeIDs(t *testing.T) {
	w, err := dag.New("w").Step("end", noop).Step("a-b", noop, dag.After("end"), dag.When(`input.s == "x"`)).Build()
	if err != nil {
		t.Fatal(err)
	}
	want := `flowchart TD
    s0["end"]
    s1["a-b<br/>when: input.s == #quot;x#quot;"]
    s0 --> s1
`
	if diff := cmp.Diff(want, w.Mermaid()); diff != "" {
		t.Errorf("Mermaid() mismatch (-want +got):\n%s", diff)
	}
}

func TestDOT(t *testing.T) {
	w, err := orderWorkflow().Build()
	if err != nil {
		t.Fatal(err)
	}
	want := `digraph "order" {
    node [shape=box];
    "reserve";
    "notify";
    "points" [label="points\nwhen: input.total >= 100"];
    "ship";
    "reserve" -> "notify";
    "reserve" -> "points";
    "reserve" -> "ship" [style=bold];
    "notify" -> "ship";
    "points" -> "ship";
}
`
	if diff := cmp.Diff(want, w.DOT()); diff != "" {
		t.Errorf("DOT() mismatch (-want +got):\n%s", diff)
	}
}
