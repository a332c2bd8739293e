//go:build !linux

package agentproc_test

import (
	"errors"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestUsageUnsupported: outside Linux Usage says it cannot, rather than
// reading zero.
func TestUsageUnsupported(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "echo usage"})
	if u, err := p.Usage(testContext(t)); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Usage: got %+v, %v; want ErrUnsupported", u, err)
	}
	if u, err := m.Scope("").Usage(testContext(t)); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Scope.Usage: got %v, %v; want ErrUnsupported", u, err)
	}
}
