package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// repoRoot is the repository's top directory.
const repoRoot = "../.."

// docPath is the doc the test holds to the code, from the root.
const docPath = "docs/architecture.md"

// problem is one stale reference of the doc.
type problem struct {
	line int
	ref  string
	why  string
}

func (p problem) String() string {
	if p.ref == "" {
		return fmt.Sprintf("%s:%d: %s", docPath, p.line, p.why)
	}
	return fmt.Sprintf("%s:%d: `%s`: %s", docPath, p.line, p.ref, p.why)
}

// TestArchitectureDoc holds docs/architecture.md to the code. It reads the
// doc's backticked code spans, outside fenced blocks (the package diagram
// is drawn, not parsed), by these rules:
//
// Files. A span that ends in .go, .lua, .yaml, .yml, .sql, .json, .txt or
// .sh is a file. With a slash it is a path from the repository's root (a
// glob such as queue/lua/*.lua must match a file). Without one it is a
// bare file name, looked up in the package its table row is about: the
// "package" column's packages in the package map, the engine in the
// engine's components table (whose "file" column holds bare names); it
// must be in exactly one of them. A bare name in prose must name exactly
// one file of the repository. The file must exist.
//
// Pinned names. A span that is a Go identifier (letters and digits, no
// underscore: dagflow_nodes is a table), Type.Member, or either with call
// parentheses (Stats(), retryAt(...)) is a name. The doc pins a name to a
// file when it writes
//
//	`Name` (`file.go`...)        `Name`, `file.go`
//	`A`, `B` and `C` in `file.go` (also `A`/`B`)
//	(`file.go`, `A`, `B`)        `file.go`'s `Name`
//
// and, in the engine's components table, an unexported name of two words
// or more (fetchLoop; not when, a YAML key) or a name with call
// parentheses that the text pins to no other file is pinned to its row's
// files. A pinned name must be declared in its file (in one of the row's
// files): Name as a top-level func, type, var or const, or a method of any
// type; Type.Member as Type's method, struct field or interface method; in
// a .lua file, a function it defines. pkg.Name (pkg a package of the
// module) pinned to a file of pkg is Name there; pinned to another
// package's file, as in (`codec.Hasher`, `hash.go`), the file implements
// it and pkg.Name is checked as unpinned.
//
// Other names, pinned to no file. An exported Name in a table row must be
// declared by one of the row's packages (as above, or as a field or
// interface method of one of its types: Concurrency, a Config field).
// pkg.Name must be declared by pkg, its tests included. Type.Member, where
// Type is an exported type of the module, must be a member of such a type
// (or of a type it embeds). Name() and a name of two words or more
// (planFor, NoWorkers) must be declared somewhere in the module, or be a
// field. Other spans (single words, statuses, SQL, YAML keys, Type.Member
// of a type the module does not have) are prose and not checked.
//
// Every stale reference is reported, with the doc's line.
func TestArchitectureDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, docPath))
	if err != nil {
		t.Fatal(err)
	}
	c := repoCode(t)
	if bad := c.stale(string(b)); len(bad) > 0 {
		var msg strings.Builder
		for _, p := range bad {
			msg.WriteString("\n" + p.String())
		}
		t.Errorf("%d stale references in %s (the rules: TestArchitectureDoc's comment):%s", len(bad), docPath, msg.String())
	}
}

var (
	codeOnce sync.Once
	codeIdx  *code
	codeErr  error
)

// repoCode is the repository's code, indexed once for all the tests.
func repoCode(t *testing.T) *code {
	t.Helper()
	codeOnce.Do(func() { codeIdx, codeErr = newCode(repoRoot) })
	if codeErr != nil {
		t.Fatal(codeErr)
	}
	return codeIdx
}

// stale is every stale reference of doc, in the doc's order.
func (c *code) stale(doc string) []problem {
	us, bad := units(doc)
	for _, u := range us {
		bad = append(bad, c.check(u)...)
	}
	sort.SliceStable(bad, func(i, j int) bool { return bad[i].line < bad[j].line })
	return bad
}

// check is the problems of one unit's references.
func (c *code) check(u unit) []problem {
	var bad []problem
	files := make([]string, len(u.spans)) // a file span's path from the root, "" when stale
	for i, s := range u.spans {
		if isFile(s.text) {
			f, why := c.resolve(s.text, u.pkgs)
			if why != "" {
				bad = append(bad, problem{s.line, s.text, why})
			}
			files[i] = f
		}
	}
	pinned := pins(u.spans)
	for i, s := range u.spans {
		if !isName(s.text) {
			continue
		}
		name := bareName(s.text)
		if f, ok := pinned[i]; ok && !c.foreign(name, files[f]) {
			if pkg, n, ok := strings.Cut(name, "."); ok && len(c.pkgs[pkg]) > 0 {
				name = n // dag.Definition pinned to a file of dag
			}
			if files[f] != "" && !strings.Contains(files[f], "*") && !c.declares(files[f], name) {
				bad = append(bad, problem{s.line, s.text, "not declared in " + files[f]})
			}
			continue
		}
		if p := c.checkUnpinned(s, name, u.pkgs, u.row); p != "" {
			bad = append(bad, problem{s.line, s.text, p})
		}
	}
	return bad
}

// camel says whether name is an unexported Go name of two words or more
// (fetchLoop), which a single lowercase word (when, child) in a table's
// prose is not.
func camel(name string) bool {
	return unicode.IsLower([]rune(name)[0]) && twoWords(name)
}

// twoWords says whether name is a Go name of two words or more: a
// lowercase letter followed by an uppercase one (planFor, NoWorkers; not
// Heartbeat or COMMIT).
func twoWords(name string) bool {
	r := []rune(name)
	for i := 1; i < len(r); i++ {
		if unicode.IsLower(r[i-1]) && unicode.IsUpper(r[i]) {
			return true
		}
	}
	return false
}

// foreign says whether name is pkg.Name, pkg a package of the module
// other than the one file is in: (`codec.Hasher`, `hash.go`) names the
// interface the file implements, and pkg.Name is checked against pkg.
func (c *code) foreign(name, file string) bool {
	pkg, _, ok := strings.Cut(name, ".")
	if !ok || len(c.pkgs[pkg]) == 0 {
		return false
	}
	for _, dir := range c.pkgs[pkg] {
		if dir == pathDir(file) {
			return false
		}
	}
	return true
}

// resolve is the path from the root of a file span, or why it is stale.
func (c *code) resolve(ref string, pkgs []string) (string, string) {
	switch {
	case strings.Contains(ref, "*"):
		m, _ := filepath.Glob(filepath.Join(c.root, filepath.FromSlash(ref)))
		if len(m) == 0 {
			return "", "matches no file"
		}
		return ref, ""
	case strings.Contains(ref, "/"):
		if !c.exists(ref) {
			return "", "no such file"
		}
		return ref, ""
	case len(pkgs) > 0:
		var found []string
		for _, p := range pkgs {
			if c.exists(p + "/" + ref) {
				found = append(found, p+"/"+ref)
			}
		}
		if len(found) != 1 {
			return "", fmt.Sprintf("in %d of the row's packages %v, want 1", len(found), pkgs)
		}
		return found[0], ""
	}
	found := c.named(ref)
	if len(found) != 1 {
		return "", fmt.Sprintf("a bare file name in prose must name one file of the repository; it names %d %v", len(found), found)
	}
	return found[0], ""
}

// named are the repository's files called base, as paths from the root.
func (c *code) named(base string) []string {
	var out []string
	_ = filepath.WalkDir(c.root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != c.root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if err == nil && !d.IsDir() && d.Name() == base {
			out = append(out, filepath.ToSlash(must(filepath.Rel(c.root, p))))
		}
		return nil
	})
	return out
}

// checkUnpinned is why a name the doc pins to no file is stale, or "".
func (c *code) checkUnpinned(s span, name string, pkgs, row []string) string {
	call := strings.Contains(s.text, "(")
	first, member, qualified := strings.Cut(name, ".")
	switch {
	case len(row) > 0 && (call || !qualified && camel(name)):
		for _, f := range row {
			if c.declares(f, name) {
				return ""
			}
		}
		return fmt.Sprintf("not declared in the row's %s", strings.Join(row, ", "))
	case len(pkgs) > 0 && !qualified && unicode.IsUpper([]rune(name)[0]):
		for _, dir := range pkgs {
			if c.inPackage(dir, name) || c.anyMember(dir, name) {
				return ""
			}
		}
		return fmt.Sprintf("declared by none of the row's packages %v", pkgs)
	case qualified && len(c.pkgs[first]) > 0:
		for _, dir := range c.pkgs[first] {
			if c.inPackage(dir, member) {
				return ""
			}
		}
		return fmt.Sprintf("package %s (%s) declares no %s", first, strings.Join(c.pkgs[first], ", "), member)
	case qualified && len(c.types[first]) > 0:
		for _, dir := range c.types[first] {
			if c.hasMember(c.goFiles(dir), first, member, 0) {
				return ""
			}
		}
		return fmt.Sprintf("no type %s of the module (%s) has %s", first, strings.Join(c.types[first], ", "), member)
	case !qualified && (call || twoWords(name)):
		for _, dirs := range c.pkgs {
			for _, dir := range dirs {
				if c.inPackage(dir, name) || c.anyMember(dir, name) {
					return ""
				}
			}
		}
		return "declared nowhere in the module"
	}
	return ""
}
