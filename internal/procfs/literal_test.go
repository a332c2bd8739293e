package procfs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoProcPathOutsideProcfs holds the package to being the one place that
// names /proc: no string literal that is a /proc path ("/proc" or starting
// with "/proc/") may appear in a non-test Go file of the repository outside
// internal/procfs (the root package, internal/cgroup, internal/testleak,
// httpapi, llmtool, cmd/agentproc, the examples). Test files may name /proc:
// a test looks at the system from outside, and an oracle that read /proc
// through the code under test would check that code against itself. Text
// that merely mentions /proc in a message or comment is not a path and is
// not looked at.
func TestNoProcPathOutsideProcfs(t *testing.T) {
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
	files, inProcfs := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		lits, err := procPathLiterals(path)
		if err != nil {
			return err
		}
		files++
		if filepath.Dir(path) == own {
			inProcfs += len(lits)
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, l := range lits {
			t.Errorf("%s:%d: %q: /proc paths are built by internal/procfs", rel, l.line, l.value)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The check must see what it looks for: internal/procfs itself names
	// /proc, so a walk that found none there (or no files) checked nothing.
	if files < 50 || inProcfs == 0 {
		t.Fatalf("walked %d Go files and found %d /proc paths in internal/procfs: the check saw nothing", files, inProcfs)
	}
}

type procLiteral struct {
	line  int
	value string
}

// procPathLiterals returns the string literals of the Go file at path that
// are /proc paths.
func procPathLiterals(path string) ([]procLiteral, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []procLiteral
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		v, err := strconv.Unquote(lit.Value)
		if err == nil && (v == "/proc" || strings.HasPrefix(v, "/proc/")) {
			out = append(out, procLiteral{fset.Position(lit.Pos()).Line, v})
		}
		return true
	})
	return out, nil
}
