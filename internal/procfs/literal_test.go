package procfs

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/agentproc/agentproc/internal/srcscan"
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
	files, inProcfs, outside, err := srcscan.Module(".", procPathLiterals)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range outside {
		t.Errorf("%s: /proc paths are built by internal/procfs", h)
	}
	// The check must see what it looks for: internal/procfs itself names
	// /proc, so a walk that found none there (or no files) checked nothing.
	if files < 50 || inProcfs == 0 {
		t.Fatalf("walked %d Go files and found %d /proc paths in internal/procfs: the check saw nothing", files, inProcfs)
	}
}

// procPathLiterals finds the string literals that are /proc paths.
func procPathLiterals(fset *token.FileSet, f *ast.File) []srcscan.Hit {
	var out []srcscan.Hit
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		v, err := strconv.Unquote(lit.Value)
		if err == nil && (v == "/proc" || strings.HasPrefix(v, "/proc/")) {
			out = append(out, srcscan.Hit{Line: fset.Position(lit.Pos()).Line, What: strconv.Quote(v)})
		}
		return true
	})
	return out
}
