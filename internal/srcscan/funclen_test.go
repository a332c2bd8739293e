package srcscan

import (
	"fmt"
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function outside tests may be, from its
// func keyword to its closing brace: past it, a function is doing the
// work of several, and a reader cannot hold its route in mind (issue 42).
const maxFuncLines = 150

// longFuncs are the functions known to be longer, each with its length
// when it was listed: one may shrink below the bound (then it leaves the
// list) but never grow. A new entry needs a reason; splitting is better.
var longFuncs = map[string]int{}

// TestNoLongFunction holds every non-test function of the repository
// (both modules, the examples included) to maxFuncLines, but for the
// listed ones, which may not grow.
func TestNoLongFunction(t *testing.T) {
	t.Parallel()
	measured, longest := 0, 0
	files, inOwn, hits, err := Module(".", func(fset *token.FileSet, f *ast.File) []Hit {
		var out []Hit
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			measured++
			start := fset.Position(fd.Pos()).Line
			n := fset.Position(fd.End()).Line - start + 1
			longest = max(longest, n)
			if n > maxFuncLines {
				out = append(out, Hit{Line: start, What: funcName(fd) + " " + strconv.Itoa(n)})
			}
		}
		return out
	})
	if err != nil {
		t.Fatal(err)
	}
	if inOwn > 0 {
		t.Errorf("internal/srcscan: got %d functions over %d lines, want none", inOwn, maxFuncLines)
	}
	seen := make(map[string]bool)
	for _, h := range hits {
		name, lines, _ := strings.Cut(h.What, " ")
		n, _ := strconv.Atoi(lines)
		key := h.File + ": " + name
		seen[key] = true
		switch was, ok := longFuncs[key]; {
		case !ok:
			t.Errorf("%s:%d: %s: got %d lines, want at most %d: split it", h.File, h.Line, name, n, maxFuncLines)
		case n > was:
			t.Errorf("%s:%d: %s: got %d lines, want at most the %d it had when listed", h.File, h.Line, name, n, was)
		}
	}
	for key := range longFuncs {
		if !seen[key] {
			t.Errorf("%s is listed as longer than %d lines but is not (split or gone): remove it from longFuncs", key, maxFuncLines)
		}
	}
	// The walk must see what it measures.
	if files < 100 || measured < 1000 || longest < 100 {
		t.Fatalf("walked %d Go files, %d functions, the longest %d lines: the check saw nothing", files, measured, longest)
	}
}

// funcName is f's name, with its receiver's type for a method.
func funcName(f *ast.FuncDecl) string {
	if f.Recv == nil || len(f.Recv.List) == 0 {
		return f.Name.Name
	}
	t := f.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if x, ok := t.(*ast.IndexExpr); ok { // a generic type's method
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + f.Name.Name
	}
	return fmt.Sprintf("%T.%s", t, f.Name.Name)
}
