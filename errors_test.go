package agentproc_test

import (
	"errors"
	"fmt"
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
