// Package yamlwalk is the strict YAML reading shared by dagflow's file
// loaders: workflows (package dag) and schedules (package cron).
//
// A loader walks the yaml.v3 node tree of one document with a [Walker]
// rather than decoding into structs, so that every problem has a line and
// column, unknown and repeated keys are caught, and all the problems of a
// file are reported at once. The Walker follows aliases everywhere (a
// value, a list item or the document may be "*name"), checks kinds and
// scalars, and collects the problems; the loader decides what each
// problem's error is (dag.YAMLError, with its own prefix) through
// Walker.NewError.
package yamlwalk
