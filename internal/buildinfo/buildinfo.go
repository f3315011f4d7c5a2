// Package buildinfo describes the running binary from its build
// information: module, version, VCS revision and Go version. `dagflow
// --version` prints it and each engine node records it in the node
// registry, so both say the same of one binary.
package buildinfo

import "runtime/debug"

// module is the main module's path, for builds that record none.
const module = "github.com/dagflow/dagflow"

// String describes the running binary (see Describe).
func String() string { return Describe(debug.ReadBuildInfo()) }

// Describe describes a binary from its build information: "dagflow",
// module path, version, VCS revision and time (when built from a
// checkout), Go version. ok false (no build information) is said so.
func Describe(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "dagflow " + module + " (no build information)"
	}
	path, version := bi.Main.Path, bi.Main.Version
	if path == "" {
		path = module
	}
	if version == "" {
		version = "(devel)"
	}
	s := "dagflow " + path + " " + version
	var rev, when, modified string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.time":
			when = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	if rev != "" {
		s += " revision " + rev + modified
		if when != "" {
			s += " " + when
		}
	} else {
		s += " revision unknown"
	}
	return s + " " + bi.GoVersion
}
