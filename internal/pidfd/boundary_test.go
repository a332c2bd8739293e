package pidfd_test

import (
	"go/ast"
	"go/token"
	"testing"

	"github.com/agentproc/agentproc/internal/srcscan"
)

// TestNoPidfdCallOutsidePidfd holds the package to being the one
// implementation of the kill protocol: no non-test Go file of the
// repository outside internal/pidfd calls pidfd_open or pidfd_send_signal
// (unix.PidfdOpen, unix.PidfdSendSignal) itself, so every signal to a
// process found by PID goes through Pin, Signal or Targets. Tests may: they
// look at processes from outside the code under test.
func TestNoPidfdCallOutsidePidfd(t *testing.T) {
	t.Parallel()
	files, inOwn, outside, err := srcscan.Module(".", pidfdCalls)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range outside {
		t.Errorf("%s: signal a process found by PID through internal/pidfd", h)
	}
	// The walk must see what it looks for: this package makes the calls.
	if files < 50 || inOwn == 0 {
		t.Fatalf("walked %d Go files and found %d pidfd calls in internal/pidfd: the check saw nothing", files, inOwn)
	}
}

// pidfdCalls finds the uses of unix.PidfdOpen and unix.PidfdSendSignal.
func pidfdCalls(fset *token.FileSet, f *ast.File) []srcscan.Hit {
	var out []srcscan.Hit
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == "unix" && (sel.Sel.Name == "PidfdOpen" || sel.Sel.Name == "PidfdSendSignal") {
			out = append(out, srcscan.Hit{Line: fset.Position(sel.Pos()).Line, What: "unix." + sel.Sel.Name})
		}
		return true
	})
	return out
}
