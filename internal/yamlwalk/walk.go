package yamlwalk

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// Walker walks one YAML document strictly and collects its problems. Set
// NewError and UnknownField before use.
type Walker struct {
	// NewError makes the error of one problem: at line and column (zero
	// when unknown), about the key path field ("steps[2].retry", "" for
	// the document), with cause err.
	NewError func(line, column int, field string, err error) error
	// UnknownField is the sentinel that the error of an unknown key wraps.
	UnknownField error

	errs []error
}

// Fail records a problem at n (nil: no position).
func (w *Walker) Fail(n *yaml.Node, field string, err error) {
	line, col := 0, 0
	if n != nil {
		line, col = n.Line, n.Column
	}
	w.errs = append(w.errs, w.NewError(line, col, field, err))
}

// Failf records a problem at n with a formatted cause.
func (w *Walker) Failf(n *yaml.Node, field, format string, args ...any) {
	w.Fail(n, field, fmt.Errorf(format, args...))
}

// Problems is how many problems were recorded so far; compare it before
// and after a part of the walk to tell whether that part had any.
func (w *Walker) Problems() int { return len(w.errs) }

// Err returns nil, the one problem, or every problem joined.
func (w *Walker) Err() error {
	switch len(w.errs) {
	case 0:
		return nil
	case 1:
		return w.errs[0]
	}
	return errors.Join(w.errs...)
}

// Document parses data, which must hold one YAML document whose top is a
// mapping, and returns that mapping; it returns nil after recording the
// problem otherwise. want describes the mapping ("a mapping with name and
// steps") and perFile says why one document ("one workflow per file").
func (w *Walker) Document(data []byte, want, perFile string) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			w.Fail(nil, "", errors.New("empty document"))
			return nil
		}
		w.syntax(err)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		w.Failf(&extra, "", "more than one YAML document (%s)", perFile)
		return nil
	}
	root := Resolve(&doc)
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			w.Fail(root, "", errors.New("empty document"))
			return nil
		}
		root = Resolve(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		w.Failf(root, "", "want %s, got %s", want, KindName(root))
		return nil
	}
	return root
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntax records a parse error, with its line when yaml.v3 gives one.
func (w *Walker) syntax(err error) {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		w.errs = append(w.errs, w.NewError(line, 0, "", errors.New(m[2])))
		return
	}
	w.Fail(nil, "", err)
}

// Resolve follows aliases (a bounded number, in case of a cycle). It never
// returns nil: a missing node reads as null.
func Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	return n
}

// KindName describes n for messages: "a mapping", "a list", "null" or
// the quoted scalar.
func KindName(n *yaml.Node) string {
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

// Join returns the key path of key inside parent.
func Join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// Fields calls fn with each key of the mapping m whose path is path, in
// order, with the key and value nodes (aliases resolved). A key that is
// not a string among known (an error wrapping UnknownField) or that is
// repeated is a problem, and fn is not called for it.
func (w *Walker) Fields(m *yaml.Node, path string, known []string, fn func(key string, k, v *yaml.Node)) {
	seen := make(map[string]bool)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := Resolve(m.Content[i]), Resolve(m.Content[i+1])
		field := Join(path, k.Value)
		if k.Kind != yaml.ScalarNode || !slices.Contains(known, k.Value) {
			w.Fail(k, field, fmt.Errorf("%w (want one of %v)", w.UnknownField, known))
			continue
		}
		if seen[k.Value] {
			w.Failf(k, field, "repeated field")
			continue
		}
		seen[k.Value] = true
		fn(k.Value, k, v)
	}
}

// Mapping reports whether n is a mapping, recording "want <what>, got
// ..." when it is not.
func (w *Walker) Mapping(n *yaml.Node, field, what string) bool {
	if n.Kind != yaml.MappingNode {
		w.Failf(n, field, "want %s, got %s", what, KindName(n))
		return false
	}
	return true
}

// List returns the items of the list n (aliases resolved), or records
// "want <what>, got ..." and returns false when n is not a list.
func (w *Walker) List(n *yaml.Node, field, what string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		w.Failf(n, field, "want %s, got %s", what, KindName(n))
		return nil, false
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		items[i] = Resolve(c)
	}
	return items, true
}

// Str decodes a scalar string (not null).
func (w *Walker) Str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		w.Failf(n, field, "want a string, got %s", KindName(n))
		return "", false
	}
	return n.Value, true
}

// Int decodes a scalar integer.
func (w *Walker) Int(n *yaml.Node, field string) (int, bool) {
	var v int
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		w.Failf(n, field, "want an integer, got %s", KindName(n))
		return 0, false
	}
	return v, true
}

// Float decodes a scalar number.
func (w *Walker) Float(n *yaml.Node, field string) (float64, bool) {
	var v float64
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		w.Failf(n, field, "want a number, got %s", KindName(n))
		return 0, false
	}
	return v, true
}

// Duration decodes a Go duration string ("1m30s").
func (w *Walker) Duration(n *yaml.Node, field string) (time.Duration, bool) {
	s, ok := w.Str(n, field)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		w.Failf(n, field, "want a duration like \"30s\" or \"1m30s\", got %q", s)
		return 0, false
	}
	return d, true
}

// Files returns the *.yaml and *.yml files at the root of fsys, in name
// order: the files a loader reads from a directory.
func Files(fsys fs.FS) ([]string, error) {
	var names []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		m, err := fs.Glob(fsys, pattern)
		if err != nil {
			return nil, err
		}
		names = append(names, m...)
	}
	slices.Sort(names)
	return names, nil
}
