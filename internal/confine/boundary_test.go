package confine_test

import (
	"go/ast"
	"go/token"
	"testing"

	"github.com/agentproc/agentproc/internal/srcscan"
)

// TestNoConfinementCallOutsideConfine holds the package to being the one
// home of the Linux confinement mechanism: no non-test Go file of the
// repository outside internal/confine makes a Landlock or seccomp system
// call, joins or makes a namespace, mounts, or drops capabilities or sets
// no_new_privs itself, so the root package only translates a Sandbox into
// this package's plain data. Tests may: they check the mechanism from
// outside.
func TestNoConfinementCallOutsideConfine(t *testing.T) {
	t.Parallel()
	files, inOwn, outside, err := srcscan.Module(".", confinementCalls)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range outside {
		t.Errorf("%s: confine a thread through internal/confine", h)
	}
	// The walk must see what it looks for: this package makes the calls.
	if files < 50 || inOwn == 0 {
		t.Fatalf("walked %d Go files and found %d confinement calls in internal/confine: the check saw nothing", files, inOwn)
	}
}

// confinementNames are the names of package unix that confine a thread or
// build what confines it.
var confinementNames = map[string]bool{
	"SYS_LANDLOCK_CREATE_RULESET": true, "SYS_LANDLOCK_ADD_RULE": true, "SYS_LANDLOCK_RESTRICT_SELF": true,
	"SYS_SECCOMP": true, "Setns": true, "Unshare": true, "Mount": true, "MountSetattr": true,
	"PR_CAPBSET_DROP": true, "PR_SET_NO_NEW_PRIVS": true,
}

// confinementCalls finds the uses of confinementNames.
func confinementCalls(fset *token.FileSet, f *ast.File) []srcscan.Hit {
	var out []srcscan.Hit
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == "unix" && confinementNames[sel.Sel.Name] {
			out = append(out, srcscan.Hit{Line: fset.Position(sel.Pos()).Line, What: "unix." + sel.Sel.Name})
		}
		return true
	})
	return out
}
