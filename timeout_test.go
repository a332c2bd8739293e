package agentproc_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

func TestNegativeTimeout(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	if _, err := m.Start(t.Context(), agentproc.Request{Command: "echo", Timeout: -time.Second}); !errors.Is(err, agentproc.ErrInvalidRequest) {
		t.Errorf("Start with a negative timeout: got %v, want ErrInvalidRequest", err)
	}
}
