// Package docscheck holds the tests that keep docs/architecture.md true as
// the code changes: every file it names must exist, and every function,
// method or type it pins to a file must be declared in that file.
//
// TestArchitectureDoc states the rule by which a reference is recognised
// and pinned to a file; a failure lists every stale reference at once,
// each with the doc's line.
//
// The package holds tests only.
package docscheck
