package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// wiring is the app's own wiring, which every command file may use: main
// and the cli.App with its env, logger and usage errors. Everything else in
// package main is a command file, which reads as flags plus a call and
// calls no function another command file defines: what two commands share
// lives in a package under ctl/internal.
var wiring = map[string]bool{"main.go": true, "app.go": true}

func TestCommandFilesCallOnlyTheirOwn(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	home := map[string]string{} // function name -> the file that defines it
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed[name] = f
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				home[fd.Name.Name] = name
			}
		}
	}
	if len(parsed) < 10 {
		t.Fatalf("read %d command files: not run in ctl/?", len(parsed))
	}
	var bad []string
	for name, f := range parsed {
		if wiring[name] {
			continue
		}
		// A name the parser resolved is this file's own (a local, or a
		// declaration here); a selector's name or a literal's key is a
		// field or a method, not a function of package main.
		notFunc := map[*ast.Ident]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				notFunc[n.Name] = true // a method's name
			case *ast.SelectorExpr:
				notFunc[n.Sel] = true
			case *ast.KeyValueExpr:
				if id, ok := n.Key.(*ast.Ident); ok {
					notFunc[id] = true
				}
			case *ast.Ident:
				def, ok := home[n.Name]
				if ok && n.Obj == nil && !notFunc[n] && command(def) != command(name) && !wiring[def] {
					bad = append(bad, fset.Position(n.Pos()).String()+": "+n.Name+" (defined in "+def+")")
				}
			}
			return true
		})
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("a command file uses another's function: %s", b)
	}
}

// command is the command a file belongs to: export_pprof.go is export's.
func command(file string) string {
	c, _, _ := strings.Cut(strings.TrimSuffix(file, ".go"), "_")
	return c
}
