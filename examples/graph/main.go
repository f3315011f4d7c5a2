// Command graph prints a bundled workflow (the order workflow by default)
// as a Mermaid flowchart or a Graphviz digraph:
//
//	go run ./examples/graph                 # Mermaid, paste into a Markdown file
//	go run ./examples/graph -format dot | dot -Tsvg > order.svg
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

func main() {
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "graph:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, args []string) error {
	fs := flag.NewFlagSet("graph", flag.ContinueOnError)
	format := fs.String("format", "mermaid", "output format: mermaid or dot")
	name := fs.String("workflow", "order", "workflow to print (from the workflows directory)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	ws, err := dag.LoadFS(workflows.FS, stubs())
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.Name() != *name {
			continue
		}
		switch *format {
		case "mermaid":
			_, err = io.WriteString(out, w.Mermaid())
		case "dot":
			_, err = io.WriteString(out, w.DOT())
		default:
			return fmt.Errorf("unknown format %q (want mermaid or dot)", *format)
		}
		return err
	}
	return fmt.Errorf("no workflow %q", *name)
}

// stubs registers a placeholder for every handler the bundled workflows
// name: drawing a graph runs nothing. A real program registers its own
// handlers under these names.
func stubs() *steps.Registry {
	reg := steps.NewRegistry()
	stub := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
		return nil, steps.Permanent(errors.New("graph: stub handler"))
	})
	for _, n := range []string{"order.reserve", "order.release", "order.notify", "order.points", "order.revoke_points", "order.ship"} {
		reg.MustRegister(n, stub)
	}
	return reg
}
