package agentproc_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

func TestErrUnsupportedIsErrorsErrUnsupported(t *testing.T) {
	t.Parallel()
	wrapped := fmt.Errorf("tty on plan9: %w", agentproc.ErrUnsupported)
	if !errors.Is(wrapped, errors.ErrUnsupported) {
		t.Errorf("errors.Is(%v, errors.ErrUnsupported) = false, want true", wrapped)
	}
	if !errors.Is(wrapped, agentproc.ErrUnsupported) {
		t.Errorf("errors.Is(%v, agentproc.ErrUnsupported) = false, want true", wrapped)
	}
	if errors.Is(agentproc.ErrNotFound, errors.ErrUnsupported) {
		t.Error("ErrNotFound matches errors.ErrUnsupported, want not")
	}
	if got, want := agentproc.ErrUnsupported.Error(), "agentproc: unsupported on this platform"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

// TestErrorNamesPackageOnce: a Start that fails in a step wrapping a
// sentinel (a relative cgroup parent is ErrInvalidRequest on Linux,
// ErrUnsupported elsewhere) gets a message that names the package once,
// in the sentinel, not again in front of the step.
func TestErrorNamesPackageOnce(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithCgroup("not/absolute"))
	p, err := m.Start(testContext(t), agentproc.Request{Command: "echo unreachable"})
	if p != nil {
		t.Fatalf("Start with a relative cgroup parent started %s, want nothing", p.ID())
	}
	if !errors.Is(err, agentproc.ErrInvalidRequest) && !errors.Is(err, agentproc.ErrUnsupported) {
		t.Fatalf("Start: got %v, want ErrInvalidRequest or ErrUnsupported", err)
	}
	if n := strings.Count(err.Error(), "agentproc: "); n != 1 {
		t.Errorf("Start: got %q, which names the package %d times, want once", err, n)
	}
}
