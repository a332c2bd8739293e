package agentproc_test

import (
	"errors"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExportedAPISamePerPlatform lists the exported API of every library
// package of the module (top-level names, methods, struct fields and
// interface methods) as built for linux, darwin, windows and freebsd, and
// fails on any difference: a program that names something must build on
// every platform (a name exported on Linux only, as DefaultDetachLogBytes
// was, breaks it elsewhere).
func TestExportedAPISamePerPlatform(t *testing.T) {
	t.Parallel()
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
			name == "internal" || name == "testdata" || name == "examples" || name == "cmd") {
			return filepath.SkipDir
		}
		dirs = append(dirs, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, dir := range dirs {
		apis := map[string][]string{}
		for _, goos := range []string{"linux", "darwin", "windows", "freebsd"} {
			api, ok := exportedAPI(t, dir, goos)
			if !ok {
				continue
			}
			apis[goos] = api
		}
		linux, ok := apis["linux"]
		if !ok {
			continue
		}
		checked++
		for goos, api := range apis {
			if goos == "linux" {
				continue
			}
			if missing := difference(linux, api); len(missing) > 0 {
				t.Errorf("package %s: exported on linux but not on %s: %v", dir, goos, missing)
			}
			if extra := difference(api, linux); len(extra) > 0 {
				t.Errorf("package %s: exported on %s but not on linux: %v", dir, goos, extra)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package checked")
	}
}

// exportedAPI returns the sorted exported names of the library package in
// dir as built for goos; ok is false for a dir without one (no Go files
// for goos, or a main package).
func exportedAPI(t *testing.T, dir, goos string) (api []string, ok bool) {
	t.Helper()
	ctx := build.Default
	ctx.GOOS, ctx.GOARCH, ctx.CgoEnabled = goos, "amd64", false
	pkg, err := ctx.ImportDir(dir, 0)
	if err != nil {
		var none *build.NoGoError
		if errors.As(err, &none) {
			return nil, false
		}
		t.Fatalf("%s for %s: %v", dir, goos, err)
	}
	if pkg.Name == "main" {
		return nil, false
	}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					seen["func "+d.Name.Name] = true
				} else if recv := receiverName(d.Recv.List[0].Type); ast.IsExported(recv) {
					seen["method "+recv+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						seen["type "+s.Name.Name] = true
						var fields *ast.FieldList
						switch ty := s.Type.(type) {
						case *ast.StructType:
							fields = ty.Fields
						case *ast.InterfaceType:
							fields = ty.Methods
						}
						if fields == nil {
							continue
						}
						for _, field := range fields.List {
							for _, n := range field.Names {
								if n.IsExported() {
									seen["field "+s.Name.Name+"."+n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								seen[d.Tok.String()+" "+n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	for k := range seen {
		api = append(api, k)
	}
	slices.Sort(api)
	return api, true
}

func receiverName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverName(x.X)
	case *ast.IndexExpr:
		return receiverName(x.X)
	case *ast.IndexListExpr:
		return receiverName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// difference returns the elements of a (sorted) not in b (sorted).
func difference(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}
