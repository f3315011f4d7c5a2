package cron

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/internal/yamlwalk"
	"github.com/dagflow/dagflow/persistence"
)

// ErrDuplicateSchedule reports two schedules of the files read by
// [LoadSchedules] (or of one file) with the same name.
var ErrDuplicateSchedule = errors.New("cron: duplicate schedule")

// scheduleFields are the keys of one schedule in a schedules file.
var scheduleFields = []string{"name", "spec", "workflow", "time_zone", "input", "overlap", "catch_up", "catch_up_window"}

// LoadSchedules reads the schedules of every *.yaml and *.yml file at the
// root of fsys, in file name order (see [ParseSchedules] for the format).
// Keep them in a directory of their own beside the workflows
// (dag.LoadFS reads every YAML file of its directory as a workflow). All
// files are read and the problems of every file are returned together;
// on error no schedule is returned. Two schedules with the same name are
// an error wrapping [ErrDuplicateSchedule].
func LoadSchedules(fsys fs.FS) ([]persistence.Schedule, error) {
	names, err := yamlwalk.Files(fsys)
	if err != nil {
		return nil, fmt.Errorf("cron: %w", err)
	}
	var (
		out  []persistence.Schedule
		errs []error
		seen = map[string]string{} // name -> where it was declared
	)
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("cron: %w", err))
			continue
		}
		list, err := parseSchedules(data, name, seen)
		errs = append(errs, err)
		out = append(out, list...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// ParseSchedules reads the schedules of one YAML file; file names it in
// errors. The file holds one top-level list:
//
//	schedules:
//	  - name: nightly-settlement   # required
//	    spec: "0 2 * * *"          # required: a cron spec (see Parse)
//	    workflow: settlement       # required
//	    time_zone: Europe/Berlin   # default UTC
//	    input: {region: eu}        # any YAML value, passed as JSON
//	    overlap: skip              # allow (default), skip, buffer_one
//	    catch_up: latest           # none, latest (default), all
//	    catch_up_window: 6h        # Go duration; default no limit
//
// Anchors and aliases work as in workflow files (input: *common, say).
// Unknown or repeated fields, wrong types, invalid specs, time zones and
// policies, and two schedules with one name are errors; each is a
// *dag.YAMLError with the file, line, column and field (several are
// joined with errors.Join), and the cause stays reachable with errors.Is
// and errors.As (an invalid spec is a *[SpecError]). On error no schedule
// is returned.
func ParseSchedules(data []byte, file string) ([]persistence.Schedule, error) {
	list, err := parseSchedules(data, file, map[string]string{})
	if err != nil {
		return nil, err
	}
	return list, nil
}

// scheduleLoader reads one schedules file.
type scheduleLoader struct {
	yamlwalk.Walker
	file string
	seen map[string]string // schedule name -> file:line:column, across files
}

// parseSchedules parses one file, recording the names it declares in
// seen and refusing the names already there. It returns the schedules
// without a problem and the problems.
func parseSchedules(data []byte, file string, seen map[string]string) ([]persistence.Schedule, error) {
	l := &scheduleLoader{file: file, seen: seen}
	l.UnknownField = dag.ErrUnknownField
	l.NewError = func(line, column int, field string, err error) error {
		return fmt.Errorf("cron: %w", &dag.YAMLError{File: file, Line: line, Column: column, Field: field, Err: unprefixed(err)})
	}
	root := l.Document(data, "a mapping with a schedules list", "one schedules list per file")
	if root == nil {
		return nil, l.Err()
	}
	var list *yaml.Node
	l.Fields(root, "", []string{"schedules"}, func(_ string, _, v *yaml.Node) { list = v })
	if list == nil {
		if l.Problems() == 0 {
			l.Fail(root, "schedules", dag.ErrMissingField)
		}
		return nil, l.Err()
	}
	items, ok := l.List(list, "schedules", "a list of schedules")
	if !ok {
		return nil, l.Err()
	}
	var out []persistence.Schedule
	for i, item := range items {
		if sc, ok := l.schedule(item, fmt.Sprintf("schedules[%d]", i)); ok {
			out = append(out, sc)
		}
	}
	return out, l.Err()
}

// schedule reads one item of the schedules list; path is its key path.
func (l *scheduleLoader) schedule(item *yaml.Node, path string) (persistence.Schedule, bool) {
	sc := persistence.Schedule{Overlap: string(OverlapAllow), CatchUp: string(CatchUpLatest)}
	if !l.Mapping(item, path, "a schedule mapping") {
		return sc, false
	}
	var (
		nodes  = map[string]*yaml.Node{} // key -> value node
		before = l.Problems()
	)
	l.Fields(item, path, scheduleFields, func(key string, _, v *yaml.Node) {
		nodes[key] = v
		field := path + "." + key
		switch key {
		case "name":
			sc.Name, _ = l.Str(v, field)
		case "spec":
			sc.Spec, _ = l.Str(v, field)
		case "workflow":
			sc.Workflow, _ = l.Str(v, field)
		case "time_zone":
			sc.TimeZone, _ = l.Str(v, field)
		case "input":
			var val any
			if err := v.Decode(&val); err != nil {
				l.Fail(v, field, err)
				return
			}
			if val == nil {
				return
			}
			raw, err := json.Marshal(val)
			if err != nil {
				l.Fail(v, field, fmt.Errorf("not representable as JSON: %v", err))
				return
			}
			sc.Input = raw
		case "overlap":
			if s, ok := l.Str(v, field); ok {
				if !Overlap(s).Valid() {
					l.Failf(v, field, "unknown overlap policy %q (want allow, skip or buffer_one)", s)
					return
				}
				sc.Overlap = s
			}
		case "catch_up":
			if s, ok := l.Str(v, field); ok {
				if !CatchUp(s).Valid() {
					l.Failf(v, field, "unknown catch-up policy %q (want none, latest or all)", s)
					return
				}
				sc.CatchUp = s
			}
		case "catch_up_window":
			if s, ok := l.Str(v, field); ok {
				d, err := time.ParseDuration(s)
				if err != nil || d < 0 {
					l.Failf(v, field, "want a non-negative Go duration like 6h, got %q", s)
					return
				}
				sc.CatchUpWindow = d
			}
		}
	})
	if l.Problems() > before {
		return sc, false
	}
	// A field of the wrong type reads as empty: only a clean item has
	// missing fields.
	for _, req := range []struct{ key, val string }{{"name", sc.Name}, {"spec", sc.Spec}, {"workflow", sc.Workflow}} {
		if req.val == "" {
			l.Fail(item, path+"."+req.key, dag.ErrMissingField)
		}
	}
	if l.Problems() > before {
		return sc, false
	}
	if _, err := Parse(sc.Name, sc.Spec, sc.TimeZone); err != nil {
		key := "spec"
		if errors.Is(err, ErrInvalidTimeZone) {
			key = "time_zone"
		}
		l.Fail(nodes[key], path+"."+key, err)
		return sc, false
	}
	n := nodes["name"]
	if prev, dup := l.seen[sc.Name]; dup {
		l.Failf(n, path+".name", "%w: schedule %q is also declared at %s", ErrDuplicateSchedule, sc.Name, prev)
		return sc, false
	}
	l.seen[sc.Name] = fmt.Sprintf("%s:%d:%d", l.file, n.Line, n.Column)
	return sc, true
}

// unprefixed hides the "cron: " of a cause inside a message that already
// starts with one; errors.Is and errors.As still reach the cause.
func unprefixed(err error) error {
	if !strings.HasPrefix(err.Error(), "cron: ") {
		return err
	}
	return &trimmed{err}
}

type trimmed struct{ err error }

func (t *trimmed) Error() string { return strings.TrimPrefix(t.err.Error(), "cron: ") }
func (t *trimmed) Unwrap() error { return t.err }
