package agentproc

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"golang.org/x/xerrors"
)

// TestPrefixFor: a step puts the package's name in front of itself only
// when nothing it wraps names the package already.
func TestPrefixFor(t *testing.T) {
	t.Parallel()
	step := xerrors.Errorf("agentproc: open output log: %w", os.ErrPermission)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"foreign", os.ErrPermission, pkgPrefix},
		{"foreign wrapped by an inner step", fmt.Errorf("create cgroup: %w", os.ErrPermission), pkgPrefix},
		{"sentinel", ErrInvalidRequest, ""},
		{"sentinel wrapped", fmt.Errorf("cgroup parent %q: %w", "x", ErrInvalidRequest), ""},
		{"a step that named it", fmt.Errorf("retry: %w", step), ""},
		{"joined, one names it", errors.Join(os.ErrClosed, fmt.Errorf("x: %w", ErrUnsupported)), ""},
		{"joined, none names it", errors.Join(os.ErrClosed, os.ErrPermission), pkgPrefix},
	}
	for _, tt := range tests {
		if got := prefixFor(tt.err); got != tt.want {
			t.Errorf("%s: prefixFor(%v) = %q, want %q", tt.name, tt.err, got, tt.want)
		}
	}
}
