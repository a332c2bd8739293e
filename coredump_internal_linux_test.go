package agentproc

import (
	"io/fs"
	"testing"
)

// TestYamaAllowsTraceMe: Yama's ptrace_scope 0 and 1 (or no Yama) let a
// child ask to be traced; 2, 3 and a scope that cannot be read do not.
func TestYamaAllowsTraceMe(t *testing.T) {
	for _, c := range []struct {
		scope string
		err   error
		want  bool
	}{
		{"", fs.ErrNotExist, true},
		{"0\n", nil, true},
		{"1\n", nil, true},
		{"2\n", nil, false},
		{"3\n", nil, false},
		{"x\n", nil, false},
		{"", fs.ErrPermission, false},
	} {
		if got := yamaAllowsTraceMe([]byte(c.scope), c.err); got != c.want {
			t.Errorf("scope %q, error %v: got %v, want %v", c.scope, c.err, got, c.want)
		}
	}
}
