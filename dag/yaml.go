package dag

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/dagflow/dagflow/steps"
)

// Errors of the YAML loader, found in a *[YAMLError]'s Err.
var (
	ErrUnknownField = errors.New("dag: unknown field")
	ErrMissingField = errors.New("dag: missing field")
	// ErrDuplicateWorkflow reports two files defining the same workflow.
	ErrDuplicateWorkflow = errors.New("dag: duplicate workflow")
)

// LoadYAML reads one workflow from YAML and builds it, resolving handler
// names in reg. filename is only used in error messages. The format:
//
//	name: order                 # required
//	version: 1                  # default 1
//	defaults:                   # all optional
//	  retry: {max_attempts: 5, initial_backoff: 1s, max_backoff: 1m, multiplier: 2, jitter: 1}
//	  timeout: 30s
//	  queue: default
//	steps:                      # required, at least one
//	  - name: reserve           # required
//	    handler: order.reserve  # required: a name registered in reg
//	    compensate: order.release
//	    timeout: 10s
//	    retry: {max_attempts: 3}
//	    queue: stock
//	  - name: points
//	    handler: order.points
//	    after: [reserve]        # or needs: [...]; a single name works too
//	    when: input.total >= 100
//
// Durations are Go duration strings ("1m30s"). The meaning is the one of
// the Go options (After, Needs, Retry, Timeout, Compensate, When, Queue);
// omitted fields inherit the same way. One difference: an explicit
// `jitter: 0` means no jitter (in Go a zero Jitter inherits; see NoJitter).
//
// Unknown fields, wrong types and unknown handlers are errors; so is every
// validation error of [Builder.Build]. Each is a *[YAMLError] with the
// file, line, column and field (several are joined with errors.Join); a
// validation error is reachable with errors.As(err, **ValidationError) and
// its sentinel with errors.Is.
func LoadYAML(data []byte, filename string, reg *steps.Registry) (*Workflow, error) {
	l := &loader{file: filename, reg: reg}
	root, err := l.document(data)
	if err != nil {
		return nil, err
	}
	w, err := l.workflow(root)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// LoadFile reads one workflow from a YAML file (see [LoadYAML]).
func LoadFile(name string, reg *steps.Registry) (*Workflow, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("dag: %w", err)
	}
	return LoadYAML(data, name, reg)
}

// LoadDir reads every *.yaml and *.yml file of dir (not its
// subdirectories), one workflow per file, in file name order. See
// [LoadFS].
func LoadDir(dir string, reg *steps.Registry) ([]*Workflow, error) {
	return loadFS(os.DirFS(dir), reg, func(name string) string { return filepath.Join(dir, name) })
}

// LoadFS reads every *.yaml and *.yml file at the root of fsys (an
// embed.FS of workflow definitions, say), one workflow per file, in file
// name order. All files are read; the problems of every file are returned
// together. Two files defining the same workflow name are an error
// wrapping [ErrDuplicateWorkflow].
func LoadFS(fsys fs.FS, reg *steps.Registry) ([]*Workflow, error) {
	return loadFS(fsys, reg, func(name string) string { return name })
}

func loadFS(fsys fs.FS, reg *steps.Registry, display func(string) string) ([]*Workflow, error) {
	var names []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		m, err := fs.Glob(fsys, pattern)
		if err != nil {
			return nil, fmt.Errorf("dag: %w", err)
		}
		names = append(names, m...)
	}
	slices.Sort(names)
	var (
		out  []*Workflow
		errs []error
		seen = make(map[string]string) // workflow -> file
	)
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("dag: %w", err))
			continue
		}
		w, err := LoadYAML(data, display(name), reg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[w.Name()]; dup {
			errs = append(errs, &YAMLError{File: display(name), Field: "name", ours: true,
				Err: fmt.Errorf("%w: workflow %q is also defined in %s", ErrDuplicateWorkflow, w.Name(), prev)})
			continue
		}
		seen[w.Name()] = display(name)
		out = append(out, w)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// loader walks the YAML node tree, so that every problem has a line and
// column and unknown fields are caught.
type loader struct {
	file string
	reg  *steps.Registry
	errs []error
}

func (l *loader) fail(n *yaml.Node, field string, err error) {
	e := &YAMLError{File: l.file, Field: field, Err: err, ours: true}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	l.errs = append(l.errs, e)
}

func (l *loader) failf(n *yaml.Node, field, format string, args ...any) {
	l.fail(n, field, fmt.Errorf(format, args...))
}

func (l *loader) err() error {
	switch len(l.errs) {
	case 0:
		return nil
	case 1:
		return l.errs[0]
	}
	return errors.Join(l.errs...)
}

// document parses data and returns the top-level mapping.
func (l *loader) document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			l.fail(nil, "", errors.New("empty document"))
			return nil, l.err()
		}
		l.syntax(err)
		return nil, l.err()
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		l.failf(&extra, "", "more than one YAML document (one workflow per file)")
		return nil, l.err()
	}
	root := resolve(&doc)
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			l.fail(root, "", errors.New("empty document"))
			return nil, l.err()
		}
		root = resolve(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		l.failf(root, "", "want a mapping with name and steps, got %s", kindName(root))
		return nil, l.err()
	}
	return root, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntax reports a parse error, with its line when yaml.v3 gives one.
func (l *loader) syntax(err error) {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		l.errs = append(l.errs, &YAMLError{File: l.file, Line: line, Err: errors.New(m[2]), ours: true})
		return
	}
	l.fail(nil, "", err)
}

// resolve follows aliases (bounded, in case of a cycle). It never returns
// nil: a missing node reads as null.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return strconv.Quote(n.Value)
	}
	return "an alias"
}

// fields iterates a mapping's key/value pairs, reporting unknown and
// repeated keys. field is the path of the mapping, for messages.
func (l *loader) fields(m *yaml.Node, field string, known []string, fn func(key string, k, v *yaml.Node)) {
	seen := make(map[string]bool)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := resolve(m.Content[i]), resolve(m.Content[i+1])
		if k == nil || v == nil {
			continue
		}
		path := join(field, k.Value)
		if k.Kind != yaml.ScalarNode || !slices.Contains(known, k.Value) {
			l.fail(k, path, fmt.Errorf("%w (want one of %v)", ErrUnknownField, known))
			continue
		}
		if seen[k.Value] {
			l.failf(k, path, "repeated field")
			continue
		}
		seen[k.Value] = true
		fn(k.Value, k, v)
	}
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// str decodes a scalar string.
func (l *loader) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		l.failf(n, field, "want a string, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

func (l *loader) integer(n *yaml.Node, field string) (int, bool) {
	var v int
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		l.failf(n, field, "want an integer, got %s", kindName(n))
		return 0, false
	}
	return v, true
}

func (l *loader) float(n *yaml.Node, field string) (float64, bool) {
	var v float64
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		l.failf(n, field, "want a number, got %s", kindName(n))
		return 0, false
	}
	return v, true
}

func (l *loader) duration(n *yaml.Node, field string) (time.Duration, bool) {
	s, ok := l.str(n, field)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		l.failf(n, field, "want a duration like \"30s\" or \"1m30s\", got %q", s)
		return 0, false
	}
	return d, true
}

// names decodes a step name or a list of them.
func (l *loader) names(n *yaml.Node, field string) []string {
	if n.Kind == yaml.ScalarNode {
		if s, ok := l.str(n, field); ok {
			return []string{s}
		}
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		l.failf(n, field, "want a step name or a list of them, got %s", kindName(n))
		return nil
	}
	var out []string
	for i, c := range n.Content {
		if s, ok := l.str(resolve(c), fmt.Sprintf("%s[%d]", field, i)); ok {
			out = append(out, s)
		}
	}
	return out
}

func (l *loader) handler(n *yaml.Node, field string) steps.Handler {
	name, ok := l.str(n, field)
	if !ok {
		return nil
	}
	if l.reg != nil {
		if h, ok := l.reg.Lookup(name); ok {
			return h
		}
	}
	l.fail(n, field, fmt.Errorf("%w %q (not in the registry)", ErrUnknownHandler, name))
	return nil
}

func (l *loader) retry(n *yaml.Node, field string) RetryPolicy {
	var p RetryPolicy
	if n.Kind != yaml.MappingNode {
		l.failf(n, field, "want a mapping, got %s", kindName(n))
		return p
	}
	known := []string{"max_attempts", "initial_backoff", "max_backoff", "multiplier", "jitter"}
	l.fields(n, field, known, func(key string, _, v *yaml.Node) {
		f := join(field, key)
		switch key {
		case "max_attempts":
			p.MaxAttempts, _ = l.integer(v, f)
		case "initial_backoff":
			p.InitialBackoff, _ = l.duration(v, f)
		case "max_backoff":
			p.MaxBackoff, _ = l.duration(v, f)
		case "multiplier":
			p.Multiplier, _ = l.float(v, f)
		case "jitter":
			if j, ok := l.float(v, f); ok {
				p.Jitter = j
				if j == 0 {
					p.Jitter = NoJitter
				}
			}
		}
	})
	return p
}

// stepNode remembers where a step was declared, to locate build errors.
type stepNode struct {
	name   string
	node   *yaml.Node
	fields map[string]*yaml.Node // key -> key node
	path   string
}

func (l *loader) workflow(root *yaml.Node) (*Workflow, error) {
	var (
		name     string
		opts     []WorkflowOption
		nameNode = root
		stepsSet bool
		decls    []stepNode
		b        = &Builder{}
	)
	known := []string{"name", "version", "defaults", "steps"}
	l.fields(root, "", known, func(key string, k, v *yaml.Node) {
		switch key {
		case "name":
			name, _ = l.str(v, key)
			nameNode = v
		case "version":
			if ver, ok := l.integer(v, key); ok {
				opts = append(opts, Version(ver))
			}
		case "defaults":
			opts = append(opts, l.defaults(v)...)
		case "steps":
			stepsSet = true
			if v.Kind != yaml.SequenceNode {
				l.failf(v, key, "want a list of steps, got %s", kindName(v))
				return
			}
			for i, sn := range v.Content {
				if d, ok := l.step(b, resolve(sn), fmt.Sprintf("steps[%d]", i)); ok {
					decls = append(decls, d)
				}
			}
		}
	})
	if nameNode == root {
		l.fail(root, "name", fmt.Errorf("%w: the workflow needs a name", ErrMissingField))
	}
	if !stepsSet {
		l.fail(root, "steps", fmt.Errorf("%w: the workflow needs steps", ErrMissingField))
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	b.name, b.opts = name, opts
	w, err := b.Build()
	if err != nil {
		l.locate(err, root, nameNode, decls)
		return nil, l.err()
	}
	return w, nil
}

func (l *loader) defaults(n *yaml.Node) []WorkflowOption {
	if n.Kind != yaml.MappingNode {
		l.failf(n, "defaults", "want a mapping, got %s", kindName(n))
		return nil
	}
	var opts []WorkflowOption
	l.fields(n, "defaults", []string{"retry", "timeout", "queue"}, func(key string, _, v *yaml.Node) {
		f := "defaults." + key
		switch key {
		case "retry":
			opts = append(opts, DefaultRetry(l.retry(v, f)))
		case "timeout":
			if d, ok := l.duration(v, f); ok {
				opts = append(opts, DefaultTimeout(d))
			}
		case "queue":
			if q, ok := l.str(v, f); ok {
				opts = append(opts, DefaultQueue(q))
			}
		}
	})
	return opts
}

func (l *loader) step(b *Builder, n *yaml.Node, path string) (stepNode, bool) {
	d := stepNode{node: n, path: path, fields: make(map[string]*yaml.Node)}
	if n.Kind != yaml.MappingNode {
		l.failf(n, path, "want a step mapping, got %s", kindName(n))
		return d, false
	}
	var (
		h    steps.Handler
		opts []StepOption
		ok   = true
	)
	known := []string{"name", "handler", "after", "needs", "when", "retry", "timeout", "compensate", "queue"}
	l.fields(n, path, known, func(key string, k, v *yaml.Node) {
		d.fields[key] = v
		f := path + "." + key
		before := len(l.errs)
		switch key {
		case "name":
			d.name, _ = l.str(v, f)
		case "handler":
			h = l.handler(v, f)
		case "after":
			opts = append(opts, After(l.names(v, f)...))
		case "needs":
			opts = append(opts, Needs(l.names(v, f)...))
		case "when":
			if s, ok := l.str(v, f); ok {
				opts = append(opts, When(s))
			}
		case "retry":
			opts = append(opts, Retry(l.retry(v, f)))
		case "timeout":
			if t, ok := l.duration(v, f); ok {
				opts = append(opts, Timeout(t))
			}
		case "compensate":
			opts = append(opts, Compensate(l.handler(v, f)))
		case "queue":
			if q, ok := l.str(v, f); ok {
				opts = append(opts, Queue(q))
			}
		}
		if len(l.errs) > before {
			ok = false
		}
	})
	for _, req := range []string{"name", "handler"} {
		if d.fields[req] == nil {
			l.fail(n, path+"."+req, fmt.Errorf("%w: every step needs a %s", ErrMissingField, req))
			ok = false
		}
	}
	if !ok {
		return d, false
	}
	b.Step(d.name, h, opts...)
	return d, true
}

// locate turns the build errors into YAMLErrors pointing at the step (and
// field) they are about.
func (l *loader) locate(err error, root, nameNode *yaml.Node, decls []stepNode) {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	dupSeen := make(map[string]int)
	for _, e := range list {
		var ve *ValidationError
		if !errors.As(e, &ve) {
			l.fail(root, "", e)
			continue
		}
		if ve.Step == "" {
			switch {
			case errors.Is(ve, ErrInvalidName) && ve.Reason != "" && nameNode != root && !isQueueReason(ve):
				l.fail(nameNode, "name", ve)
			case errors.Is(ve, ErrEmptyWorkflow) || errors.Is(ve, ErrTooManySteps):
				l.fail(root, "steps", ve)
			case strings.Contains(ve.Reason, "default"):
				l.fail(root, "defaults", ve)
			case strings.HasPrefix(ve.Reason, "version"):
				l.fail(root, "version", ve)
			default:
				l.fail(root, "", ve)
			}
			continue
		}
		// The step the error is about: for a duplicate, its second
		// declaration.
		idx := -1
		skip := 0
		if errors.Is(ve, ErrDuplicateStep) {
			dupSeen[ve.Step]++
			skip = dupSeen[ve.Step]
		}
		for i, d := range decls {
			if d.name == ve.Step {
				if skip == 0 {
					idx = i
					break
				}
				skip--
			}
		}
		if idx < 0 {
			l.fail(root, "", ve)
			continue
		}
		d := decls[idx]
		field, node := d.path, d.node
		key := ""
		switch {
		case errors.Is(ve, ErrBadCondition):
			key = "when"
		case errors.Is(ve, ErrUnknownDependency), errors.Is(ve, ErrSelfDependency), errors.Is(ve, ErrCycle):
			key = "after"
			if d.fields["after"] == nil {
				key = "needs"
			}
		case errors.Is(ve, ErrInvalidName):
			key = "name"
			if isQueueReason(ve) {
				key = "queue"
			}
		case errors.Is(ve, ErrInvalidOption):
			key = "retry"
			if strings.Contains(ve.Reason, "timeout") {
				key = "timeout"
			}
		case errors.Is(ve, ErrDuplicateStep):
			key = "name"
		}
		if v := d.fields[key]; v != nil {
			field, node = d.path+"."+key, v
		}
		l.fail(node, field, ve)
	}
}

func isQueueReason(ve *ValidationError) bool { return strings.Contains(ve.Reason, "queue name") }
