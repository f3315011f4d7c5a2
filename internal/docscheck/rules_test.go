package docscheck

import (
	"slices"
	"strings"
	"testing"
)

// The checker finds what each of its rules says is stale and passes what
// is true, so a passing TestArchitectureDoc means something. The doc
// below names this repository's real code, and names that do not exist.
func TestStaleReferencesCaught(t *testing.T) {
	doc := strings.Join([]string{
		"# doc",          // 1
		"",               // 2
		"## Package map", // 3
		"",               // 4
		"```",            // 5
		"engine ──► `gone/in/a/diagram.go`", // 6
		"```",               // 7
		"",                  // 8
		"| package | job |", // 9
		"|---|---|",         // 10
		"| `steps` | `Handler`, `NoHandler`, `http.go`, `gone.go` |", // 11
		"",                           // 12
		"## The engine's components", // 13
		"",                           // 14
		"| component | file | job |", // 15
		"|---|---|---|",              // 16
		"| fetcher | `fetcher.go` | `fetchLoop`, `fetchGone`, `Stats()`, `Trigger`, `NoAPI`, `when`, `Concurrency` |", // 17
		"| gone | `gone.go` | x |", // 18
		"",                         // 19
		"`Engine.Start` (`engine/engine.go`), `Engine.Gone` (`engine/engine.go`),",                          // 20
		"`runClaimed` and `goneFunc` in `engine/step.go`, (`engine/outcome.go`, `stepFailed`, `goneToo`),",  // 21
		"`dag/eval.go`'s `evaluate`, `dag/eval.go`'s `evalGone`, `promote` in `queue/lua/common.lua`,",      // 22
		"`promoGone` in `queue/lua/common.lua`, `queue/lua/*.lua`, `queue/none/*.lua`, `api/openapi.yaml`,", // 23
		"`nofile.go`, `doc.go`, `dag.Definition`, `dag.Gone`, `Config.ReadStore`, `Config.NoField`,",        // 24
		"`Store.RunCreateMany`, `Store.RunGone`, `retryAt(...)`, `goneCall()`, `when`, `kind: http`.",       // 25
		"`planFor`, `NoWorkers`, `planGone`, `Heartbeat`, `registered_at`, `COMMIT`.",                       // 26
	}, "\n")
	c := repoCode(t)
	var got []string
	for _, p := range c.stale(doc) {
		got = append(got, strings.SplitN(p.String(), ": ", 3)[0]+" "+p.ref)
	}
	want := []string{
		"docs/architecture.md:11 NoHandler",
		"docs/architecture.md:11 gone.go",
		"docs/architecture.md:17 fetchGone",
		"docs/architecture.md:17 Stats()", // declared in stats.go
		"docs/architecture.md:17 NoAPI",
		"docs/architecture.md:18 gone.go",
		"docs/architecture.md:20 Engine.Gone",
		"docs/architecture.md:21 goneFunc",
		"docs/architecture.md:21 goneToo",
		"docs/architecture.md:22 evalGone",
		"docs/architecture.md:23 promoGone",
		"docs/architecture.md:23 queue/none/*.lua",
		"docs/architecture.md:24 nofile.go",
		"docs/architecture.md:24 doc.go",
		"docs/architecture.md:24 dag.Gone",
		"docs/architecture.md:24 Config.NoField",
		"docs/architecture.md:25 Store.RunGone",
		"docs/architecture.md:25 goneCall()",
		"docs/architecture.md:26 planGone",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("stale references found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
