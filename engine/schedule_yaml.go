package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/dag"
)

// scheduleFields are the keys of one schedule in a schedules file.
var scheduleFields = []string{"name", "spec", "workflow", "time_zone", "input", "overlap", "catch_up", "catch_up_window"}

// LoadSchedules declares (as Schedule does) the schedules of every *.yaml
// and *.yml file at the root of fsys, in file name order. Keep them in a
// directory of their own beside the workflows (dag.LoadFS reads every
// YAML file of its directory as a workflow). A file holds one top-level
// list:
//
//	schedules:
//	  - name: nightly-settlement   # required
//	    spec: "0 2 * * *"          # required: a cron spec (package cron)
//	    workflow: settlement       # required
//	    time_zone: Europe/Berlin   # default UTC
//	    input: {region: eu}        # any YAML value, passed as JSON
//	    overlap: skip              # allow (default), skip, buffer_one
//	    catch_up: latest           # none, latest (default), all
//	    catch_up_window: 6h        # Go duration; default no limit
//
// Unknown fields, wrong types and invalid values are errors; each is a
// *dag.YAMLError with the file, line and field (several are joined).
func (e *Engine) LoadSchedules(fsys fs.FS) error {
	var names []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		m, err := fs.Glob(fsys, pattern)
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		names = append(names, m...)
	}
	slices.Sort(names)
	var errs []error
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("engine: %w", err))
			continue
		}
		errs = append(errs, e.loadSchedules(data, name))
	}
	return errors.Join(errs...)
}

type scheduleLoader struct {
	file string
	errs []error
}

func (l *scheduleLoader) fail(n *yaml.Node, field string, err error) {
	ye := &dag.YAMLError{File: l.file, Field: field, Err: err}
	if n != nil {
		ye.Line, ye.Column = n.Line, n.Column
	}
	l.errs = append(l.errs, fmt.Errorf("engine: %w", ye))
}

// fields walks a mapping, reporting unknown and repeated keys.
func (l *scheduleLoader) fields(m *yaml.Node, path string, known []string, fn func(key string, v *yaml.Node)) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		field := k.Value
		if path != "" {
			field = path + "." + k.Value
		}
		if k.Kind != yaml.ScalarNode || !slices.Contains(known, k.Value) {
			l.fail(k, field, fmt.Errorf("%w (want one of %v)", dag.ErrUnknownField, known))
			continue
		}
		if seen[k.Value] {
			l.fail(k, field, errors.New("repeated field"))
			continue
		}
		seen[k.Value] = true
		fn(k.Value, v)
	}
}

func (l *scheduleLoader) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		l.fail(n, field, errors.New("want a string"))
		return "", false
	}
	return n.Value, true
}

func (e *Engine) loadSchedules(data []byte, file string) error {
	l := &scheduleLoader{file: file}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("empty document")
		}
		l.fail(nil, "", err)
		return errors.Join(l.errs...)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		l.fail(root, "", errors.New("want a mapping with a schedules list"))
		return errors.Join(l.errs...)
	}
	var list *yaml.Node
	l.fields(root, "", []string{"schedules"}, func(_ string, v *yaml.Node) { list = v })
	if list == nil {
		if len(l.errs) == 0 {
			l.fail(root, "schedules", dag.ErrMissingField)
		}
		return errors.Join(l.errs...)
	}
	if list.Kind != yaml.SequenceNode {
		l.fail(list, "schedules", errors.New("want a list"))
		return errors.Join(l.errs...)
	}
	for i, item := range list.Content {
		path := fmt.Sprintf("schedules[%d]", i)
		if item.Kind != yaml.MappingNode {
			l.fail(item, path, errors.New("want a mapping"))
			continue
		}
		var (
			name, spec, workflow string
			input                any
			opts                 []ScheduleOption
			catchUp              = cron.CatchUpLatest
			window               time.Duration
			before               = len(l.errs)
		)
		l.fields(item, path, scheduleFields, func(key string, v *yaml.Node) {
			field := path + "." + key
			switch key {
			case "name":
				name, _ = l.str(v, field)
			case "spec":
				spec, _ = l.str(v, field)
			case "workflow":
				workflow, _ = l.str(v, field)
			case "time_zone":
				if s, ok := l.str(v, field); ok {
					opts = append(opts, TimeZone(s))
				}
			case "input":
				var val any
				if err := v.Decode(&val); err != nil {
					l.fail(v, field, err)
					return
				}
				if _, err := json.Marshal(val); err != nil {
					l.fail(v, field, fmt.Errorf("not representable as JSON: %v", err))
					return
				}
				input = val
			case "overlap":
				if s, ok := l.str(v, field); ok {
					if !cron.Overlap(s).Valid() {
						l.fail(v, field, fmt.Errorf("unknown overlap policy %q (want allow, skip or buffer_one)", s))
						return
					}
					opts = append(opts, Overlap(cron.Overlap(s)))
				}
			case "catch_up":
				if s, ok := l.str(v, field); ok {
					if !cron.CatchUp(s).Valid() {
						l.fail(v, field, fmt.Errorf("unknown catch-up policy %q (want none, latest or all)", s))
						return
					}
					catchUp = cron.CatchUp(s)
				}
			case "catch_up_window":
				if s, ok := l.str(v, field); ok {
					d, err := time.ParseDuration(s)
					if err != nil || d < 0 {
						l.fail(v, field, fmt.Errorf("want a non-negative Go duration like 6h, got %q", s))
						return
					}
					window = d
				}
			}
		})
		for _, req := range []struct{ key, val string }{{"name", name}, {"spec", spec}, {"workflow", workflow}} {
			if req.val == "" && len(l.errs) == before {
				l.fail(item, path+"."+req.key, dag.ErrMissingField)
			}
		}
		if len(l.errs) > before {
			continue
		}
		opts = append(opts, CatchUp(catchUp, window))
		if err := e.Schedule(name, spec, workflow, input, opts...); err != nil {
			l.fail(item, path, err)
		}
	}
	return errors.Join(l.errs...)
}
