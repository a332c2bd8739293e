package pidfd_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoPidfdCallOutsidePidfd holds the package to being the one
// implementation of the kill protocol: no non-test Go file of the
// repository outside internal/pidfd calls pidfd_open or pidfd_send_signal
// (unix.PidfdOpen, unix.PidfdSendSignal) itself, so every signal to a
// process found by PID goes through Pin, Signal or Targets. Tests may: they
// look at processes from outside the code under test.
func TestNoPidfdCallOutsidePidfd(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if mod, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.Contains(string(mod), "module github.com/agentproc/agentproc\n") {
		t.Fatalf("%s is not the module's root (go.mod: %v)", root, err)
	}
	own, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	files, inOwn := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		calls, err := pidfdCalls(path)
		if err != nil {
			return err
		}
		files++
		if filepath.Dir(path) == own {
			inOwn += len(calls)
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, c := range calls {
			t.Errorf("%s:%d: %s: signal a process found by PID through internal/pidfd", rel, c.line, c.name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must see what it looks for: this package makes the calls.
	if files < 50 || inOwn == 0 {
		t.Fatalf("walked %d Go files and found %d pidfd calls in internal/pidfd: the check saw nothing", files, inOwn)
	}
}

type pidfdCall struct {
	line int
	name string
}

// pidfdCalls returns the uses of unix.PidfdOpen and unix.PidfdSendSignal
// in the Go file at path.
func pidfdCalls(path string) ([]pidfdCall, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []pidfdCall
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == "unix" && (sel.Sel.Name == "PidfdOpen" || sel.Sel.Name == "PidfdSendSignal") {
			out = append(out, pidfdCall{fset.Position(sel.Pos()).Line, "unix." + sel.Sel.Name})
		}
		return true
	})
	return out, nil
}
