package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// fileDecls is what one Go file declares at its top level.
type fileDecls struct {
	top     map[string]bool     // funcs, types, vars and consts
	types   map[string]bool     // types alone
	methods map[string]bool     // method names, on any receiver
	members map[string]bool     // "T.M": T's methods, struct fields and interface methods
	embeds  map[string][]string // T: the types T embeds ("E" or "pkg.E")
}

// code answers what the repository's files declare. It parses each Go
// file once, when it is first asked about.
type code struct {
	root  string
	mu    sync.Mutex
	files map[string]*fileDecls // by slash path from root; nil: unparsable or absent
	pkgs  map[string][]string   // a package's name: its directories, from root
	types map[string][]string   // an exported type's name: the directories declaring it (test files aside)
}

// newCode indexes the Go packages under root: their names and the types
// they declare. Hidden directories and testdata are left out.
func newCode(root string) (*code, error) {
	c := &code{root: root, files: map[string]*fileDecls{}, pkgs: map[string][]string{}, types: map[string][]string{}}
	dirs := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") {
			dirs[filepath.ToSlash(must(filepath.Rel(root, filepath.Dir(p))))] = true
		}
		return nil
	})
	for dir := range dirs {
		c.pkgs[filepath.Base(dir)] = append(c.pkgs[filepath.Base(dir)], dir)
		for _, f := range c.goFiles(dir) {
			if d := c.file(f); d != nil {
				for n := range d.types {
					if ast.IsExported(n) && !strings.HasSuffix(f, "_test.go") {
						c.types[n] = appendOnce(c.types[n], dir)
					}
				}
			}
		}
	}
	return c, err
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// goFiles are the .go files of dir (test files too), as slash paths from
// the root.
func (c *code) goFiles(dir string) []string {
	entries, _ := os.ReadDir(filepath.Join(c.root, filepath.FromSlash(dir)))
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") {
			out = append(out, dir+"/"+e.Name())
		}
	}
	return out
}

// exists says whether the slash path rel names a file or directory.
func (c *code) exists(rel string) bool {
	_, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(rel)))
	return err == nil
}

// file is what the Go file rel declares, nil if it cannot be parsed.
func (c *code) file(rel string) *fileDecls {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.files[rel]; ok {
		return d
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(c.root, filepath.FromSlash(rel)), nil, parser.SkipObjectResolution)
	var d *fileDecls
	if err == nil {
		d = collect(f)
	}
	c.files[rel] = d
	return d
}

// collect gathers a parsed file's top-level declarations.
func collect(f *ast.File) *fileDecls {
	d := &fileDecls{top: map[string]bool{}, types: map[string]bool{}, methods: map[string]bool{}, members: map[string]bool{}, embeds: map[string][]string{}}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Recv == nil || len(decl.Recv.List) == 0 {
				d.top[decl.Name.Name] = true
				continue
			}
			d.methods[decl.Name.Name] = true
			d.members[receiverType(decl.Recv.List[0].Type)+"."+decl.Name.Name] = true
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					d.top[spec.Name.Name] = true
					d.types[spec.Name.Name] = true
					d.typeMembers(spec.Name.Name, spec.Type)
				case *ast.ValueSpec:
					for _, n := range spec.Names {
						d.top[n.Name] = true
					}
				}
			}
		}
	}
	return d
}

// typeMembers records the fields or interface methods of type name, and
// what it embeds.
func (d *fileDecls) typeMembers(name string, t ast.Expr) {
	var fields *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, f := range fields.List {
		if len(f.Names) == 0 {
			d.embeds[name] = append(d.embeds[name], typeName(f.Type))
			continue
		}
		for _, n := range f.Names {
			d.members[name+"."+n.Name] = true
		}
	}
}

// receiverType is a method receiver's base type name: T for T, *T, T[P].
func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// typeName is an embedded type's name: E, or pkg.E.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return x.Name + "." + e.Sel.Name
		}
	}
	return ""
}

// declares says whether the file rel declares the name: a top-level
// func, type, var or const, or a method of any type for an unqualified
// name; T's method, field or interface method for "T.M", declared in
// this file itself. A Lua file declares a function it defines, local or
// not.
func (c *code) declares(rel, name string) bool {
	if strings.HasSuffix(rel, ".lua") {
		b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(rel)))
		re := regexp.MustCompile(`(?m)^\s*(local\s+)?function\s+` + regexp.QuoteMeta(name) + `\s*\(|local\s+` + regexp.QuoteMeta(name) + `\s*=\s*function`)
		return err == nil && re.Match(b)
	}
	d := c.file(rel)
	if d == nil {
		return false
	}
	if strings.Contains(name, ".") {
		return d.members[name]
	}
	return d.top[name] || d.methods[name]
}

// inPackage says whether a file of the package in dir (test files too)
// declares the name, as declares does.
func (c *code) inPackage(dir, name string) bool {
	typ, member, qualified := strings.Cut(name, ".")
	if qualified {
		return c.hasMember(c.goFiles(dir), typ, member, 0)
	}
	for _, f := range c.goFiles(dir) {
		if d := c.file(f); d != nil && (d.top[name] || d.methods[name]) {
			return true
		}
	}
	return false
}

// anyMember says whether a type of the package in dir (test files aside)
// has a field, method or interface method called name.
func (c *code) anyMember(dir, name string) bool {
	for _, f := range c.goFiles(dir) {
		if d := c.file(f); d != nil && !strings.HasSuffix(f, "_test.go") {
			for m := range d.members {
				if strings.HasSuffix(m, "."+name) {
					return true
				}
			}
		}
	}
	return false
}

// hasMember says whether type typ, as the files declare it, has member:
// its own, or one of a type it embeds (of the files' package, or of the
// module's package pkg for pkg.E).
func (c *code) hasMember(files []string, typ, member string, depth int) bool {
	if depth > 8 {
		return false
	}
	for _, f := range files {
		d := c.file(f)
		if d == nil {
			continue
		}
		if d.members[typ+"."+member] {
			return true
		}
		for _, e := range d.embeds[typ] {
			scope := c.goFiles(pathDir(f))
			if pkg, t, ok := strings.Cut(e, "."); ok {
				scope = nil
				for _, dir := range c.pkgs[pkg] {
					scope = append(scope, c.goFiles(dir)...)
				}
				e = t
			}
			if c.hasMember(scope, e, member, depth+1) {
				return true
			}
		}
	}
	return false
}

func pathDir(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}
