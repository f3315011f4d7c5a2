package dag

import (
	"fmt"
	"strings"
)

// Mermaid renders the workflow as a Mermaid flowchart, top to bottom.
// Edges go from a dependency to its dependent: --> for [After], ==> (thick)
// for [Needs]. A step with a condition shows it under its name. Nodes are
// listed in declaration order, edges grouped by dependent.
func (w *Workflow) Mermaid() string {
	ids := w.mermaidIDs()
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	for i, s := range w.steps {
		label := s.Name
		if s.When != "" {
			label += "<br/>when: " + s.When
		}
		fmt.Fprintf(&b, "    %s[\"%s\"]\n", ids[i], mermaidEscape(label))
	}
	for j, s := range w.steps {
		for _, dep := range s.Deps {
			arrow := "-->"
			if contains(s.Needs, dep) {
				arrow = "==>"
			}
			fmt.Fprintf(&b, "    %s %s %s\n", ids[w.index[dep]], arrow, ids[j])
		}
	}
	return b.String()
}

// mermaidIDs uses the step names as node ids when Mermaid can read them
// all (no '-', no "end" keyword), and s0, s1... otherwise.
func (w *Workflow) mermaidIDs() []string {
	ids := make([]string, len(w.steps))
	plain := true
	for i, s := range w.steps {
		ids[i] = s.Name
		if strings.ContainsRune(s.Name, '-') || strings.EqualFold(s.Name, "end") {
			plain = false
		}
	}
	if !plain {
		for i := range ids {
			ids[i] = fmt.Sprintf("s%d", i)
		}
	}
	return ids
}

var mermaidReplacer = strings.NewReplacer(`"`, "#quot;", "<br/>", "<br/>", "<", "#lt;", ">", "#gt;")

func mermaidEscape(s string) string { return mermaidReplacer.Replace(s) }

// DOT renders the workflow as a Graphviz digraph. Edges go from a
// dependency to its dependent; [Needs] edges are bold. A step with a
// condition shows it under its name.
func (w *Workflow) DOT() string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotQuote(w.name))
	b.WriteString("    node [shape=box];\n")
	for _, s := range w.steps {
		if s.When == "" {
			fmt.Fprintf(&b, "    %s;\n", dotQuote(s.Name))
			continue
		}
		fmt.Fprintf(&b, "    %s [label=%s];\n", dotQuote(s.Name), dotQuote(s.Name+"\n"+"when: "+s.When))
	}
	for _, s := range w.steps {
		for _, dep := range s.Deps {
			attr := ""
			if contains(s.Needs, dep) {
				attr = " [style=bold]"
			}
			fmt.Fprintf(&b, "    %s -> %s%s;\n", dotQuote(dep), dotQuote(s.Name), attr)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

var dotReplacer = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func dotQuote(s string) string { return `"` + dotReplacer.Replace(s) + `"` }
