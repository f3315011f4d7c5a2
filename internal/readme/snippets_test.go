package readme

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// givens are what the README's Go snippets take from the reader: a
// context, a test's t, the reader's stock and carrier services and the
// order workflow's other handlers. Everything else a snippet names comes from
// dagflow, from an earlier snippet, or from a package the snippet (or an
// earlier one) imports.
const givens = `package snippets

import (
	"context"
	"testing"

	"github.com/dagflow/dagflow/steps"
)

var (
	ctx, shutdownCtx                         context.Context
	t                                        *testing.T
	release, notify, points, revokePoints    steps.Handler
	input                                    any
	stock struct {
		Reserve        func(ctx context.Context, idempotencyKey, orderID string) (reservationID string, err error)
		ErrUnknownItem error
	}
	carrier struct {
		Ship func(ctx context.Context, idempotencyKey, reservationID string) (trackingNumber string, err error)
	}
)
`

// snippet is a Go block of the README split into its import declarations
// and the rest, which is read as the body of a function.
type snippet struct {
	line    int      // the README's line of the block's first line
	imports []string // the import paths it declares
	decls   string   // its import declarations
	body    string
	lines   int // its number of lines
}

// TestGoSnippets type-checks the README's Go blocks against the module's
// packages. They read as one program, top to bottom: each block is the
// body of a block nested in the one before, so that it sees what earlier
// blocks declared (and may declare the same names again), and it must
// import every package it is the first to use. Unused variables and
// imports are allowed (go/types calls them soft errors): a snippet shows
// a call, not what is done with its result.
func TestGoSnippets(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("compiles the export data of the packages the snippets import")
	}
	md := readme(t)
	var snippets []snippet
	for _, b := range fencedBlocks(t, md, 1) {
		if b.lang == "go" {
			snippets = append(snippets, splitSnippet(t, b))
		}
	}
	if len(snippets) == 0 {
		t.Fatal("README.md has no Go block")
	}
	fset := token.NewFileSet()
	files := []*ast.File{parse(t, fset, "givens.go", givens)}
	src := program(snippets)
	prog := parse(t, fset, "program.go", src)
	files = append(files, prog)

	var errs []string
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", exportLookup(t, files)),
		Error: func(err error) {
			if te, ok := err.(types.Error); ok && te.Soft {
				return
			}
			errs = append(errs, err.Error())
		},
	}
	conf.Check("snippets", fset, files, info)
	errs = append(errs, undeclaredImports(fset, prog, info, snippets)...)
	if len(errs) > 0 {
		t.Errorf("the README's Go snippets do not compile:\n%s", strings.Join(errs, "\n"))
	}
}

// splitSnippet separates the import declarations at the top of a block.
func splitSnippet(t *testing.T, b block) snippet {
	t.Helper()
	s := snippet{line: b.line, lines: strings.Count(b.text, "\n")}
	if strings.HasPrefix(strings.TrimSpace(b.text), "package ") {
		t.Fatalf("README.md:%d: a Go block with a package clause: the test reads blocks as function bodies", b.line)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+b.text, parser.ImportsOnly)
	if err != nil && len(f.Imports) == 0 {
		return snippet{line: b.line, lines: s.lines, body: b.text}
	}
	end := 0
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.IMPORT {
			end = int(gd.End()) - 1 - len("package p\n")
		}
	}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		s.imports = append(s.imports, p)
	}
	s.decls, s.body = b.text[:end], b.text[end:]
	return s
}

// program is one file: the imports of every snippet, then a function
// with each snippet's body in a block nested in the one before. Line
// directives make positions those of the README.
func program(snippets []snippet) string {
	var b strings.Builder
	b.WriteString("package snippets\n\n")
	for _, s := range snippets {
		fmt.Fprintf(&b, "//line README.md:%d\n%s\n", s.line, s.decls)
	}
	b.WriteString("func readme() {\n")
	for _, s := range snippets {
		// The body starts on the block's line after its imports.
		fmt.Fprintf(&b, "{\n//line README.md:%d\n%s\n", s.line+strings.Count(s.decls, "\n"), s.body)
	}
	b.WriteString(strings.Repeat("}\n", len(snippets)) + "}\n")
	return b.String()
}

func parse(t *testing.T, fset *token.FileSet, name, src string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("the README's Go snippets do not parse: %v", err)
	}
	return f
}

// undeclaredImports are the packages a snippet uses that neither it nor
// an earlier snippet imports: in the program they are all imported at
// the top, but a reader copying the snippets needs to be told.
func undeclaredImports(fset *token.FileSet, prog *ast.File, info *types.Info, snippets []snippet) []string {
	var errs []string
	ast.Inspect(prog, func(n ast.Node) bool {
		id, ok := n.(*ast.Ident)
		if !ok {
			return true
		}
		pn, ok := info.Uses[id].(*types.PkgName)
		if !ok {
			return true
		}
		pos := fset.Position(id.Pos())
		shown := map[string]bool{}
		for _, s := range snippets {
			if s.line > pos.Line {
				break
			}
			for _, p := range s.imports {
				shown[p] = true
			}
		}
		if path := pn.Imported().Path(); !shown[path] {
			errs = append(errs, fmt.Sprintf("%s: %s is package %q, imported by no snippet up to here", pos, id.Name, path))
		}
		return true
	})
	return errs
}

// exportLookup finds the export data of the packages the files import,
// and of their dependencies, as the go command builds them.
func exportLookup(t *testing.T, files []*ast.File) importer.Lookup {
	t.Helper()
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}
	seen := map[string]bool{}
	for _, f := range files {
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); !seen[p] {
				seen[p] = true
				args = append(args, p)
			}
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, file, ok := strings.Cut(l, "="); ok && file != "" {
			exports[p] = file
		}
	}
	return func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %q (not a dependency of the module?)", path)
		}
		return os.Open(file)
	}
}
