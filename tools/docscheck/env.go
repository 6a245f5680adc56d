package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// envRead is one MLCOMPUTE_ variable the code reads.
type envRead struct {
	name string
	pos  token.Position
}

// The code whose variables users may set: everything but tests, test helper packages
// (whose names end in "test"), the benchmark and other tools.
func codeDirs(path string, d fs.DirEntry) (skip bool) {
	name := d.Name()
	return path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "tools" || name == "test" || strings.HasSuffix(name, "test"))
}

// findEnvReads parses the module's Go files (syntax only) and returns every MLCOMPUTE_
// variable read with os.Getenv or os.LookupEnv: a string literal, a constant of the same or
// another package of the module, or a constant passed to a function that hands its
// parameter to os.Getenv (such as envOr(name, fallback)).
func findEnvReads(module string) ([]envRead, error) {
	fset := token.NewFileSet()
	type pkgFile struct {
		pkg  string
		file *ast.File
	}
	var files []pkgFile
	consts := map[string]string{} // "import/path.Name" -> value
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if codeDirs(path, d) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := module
		if dir := filepath.ToSlash(filepath.Dir(path)); dir != "." {
			pkg += "/" + dir
		}
		files = append(files, pkgFile{pkg, f})
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if s, ok := stringLit(vs.Values[i]); ok {
							consts[pkg+"."+n.Name] = s
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// value resolves an expression to a string constant, in the file's package.
	value := func(pf pkgFile, e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			return stringLit(e)
		case *ast.Ident:
			s, ok := consts[pf.pkg+"."+e.Name]
			return s, ok
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok {
				if path := importPath(pf.file, x.Name); path != "" {
					s, ok := consts[path+"."+e.Sel.Name]
					return s, ok
				}
			}
		}
		return "", false
	}
	isEnvCall := func(f *ast.File, call *ast.CallExpr) bool {
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || (sel.Sel.Name != "Getenv" && sel.Sel.Name != "LookupEnv") || len(call.Args) != 1 {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		return ok && importPath(f, x.Name) == "os"
	}
	// wrappers: functions of a package that pass their parameter number i to os.Getenv.
	wrappers := map[string]int{} // "import/path.Func" -> parameter index
	for _, pf := range files {
		for _, decl := range pf.file.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Body == nil {
				continue
			}
			params := paramNames(fd.Type)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok && isEnvCall(pf.file, call) {
					if id, ok := call.Args[0].(*ast.Ident); ok {
						for i, p := range params {
							if p == id.Name {
								wrappers[pf.pkg+"."+fd.Name.Name] = i
							}
						}
					}
				}
				return true
			})
		}
	}
	var reads []envRead
	for _, pf := range files {
		ast.Inspect(pf.file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			arg := -1
			if isEnvCall(pf.file, call) {
				arg = 0
			} else if id, ok := call.Fun.(*ast.Ident); ok {
				if i, ok := wrappers[pf.pkg+"."+id.Name]; ok {
					arg = i
				}
			}
			if arg >= 0 && arg < len(call.Args) {
				if s, ok := value(pf, call.Args[arg]); ok && strings.HasPrefix(s, "MLCOMPUTE_") {
					reads = append(reads, envRead{s, fset.Position(call.Args[arg].Pos())})
				}
			}
			return true
		})
	}
	return reads, nil
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func importPath(f *ast.File, name string) string {
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		local := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			local = imp.Name.Name
		}
		if local == name {
			return path
		}
	}
	return ""
}

func paramNames(ft *ast.FuncType) []string {
	var names []string
	for _, field := range ft.Params.List {
		for _, n := range field.Names {
			names = append(names, n.Name)
		}
	}
	return names
}

func moduleName() (string, error) {
	b, err := os.ReadFile("go.mod")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "module "); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	return "", fmt.Errorf("go.mod names no module")
}

// docsText is every page of docs/, for the variables check.
func docsText() (string, error) {
	var b strings.Builder
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		data, err := os.ReadFile(path)
		b.Write(data)
		return err
	})
	return b.String(), err
}

func checkEnvVars() ([]finding, error) {
	module, err := moduleName()
	if err != nil {
		return nil, err
	}
	reads, err := findEnvReads(module)
	if err != nil {
		return nil, err
	}
	docs, err := docsText()
	if err != nil {
		return nil, err
	}
	var out []finding
	seen := map[string]bool{}
	for _, r := range reads {
		if seen[r.name] || containsWord(docs, r.name) {
			continue
		}
		seen[r.name] = true
		out = append(out, finding{r.pos.Filename, r.pos.Line, fmt.Sprintf("the code reads %s, which no page of docs/ names (the engine guide lists the variables)", r.name)})
	}
	return out, nil
}

// containsWord reports whether name appears in text not followed by another name character.
func containsWord(text, name string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		end := i + j + len(name)
		if end == len(text) || !isNameChar(text[end]) {
			return true
		}
		i = end
	}
}

func isNameChar(c byte) bool {
	return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
}
