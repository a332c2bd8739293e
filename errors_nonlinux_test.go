//go:build !linux

package agentproc_test

import (
	"errors"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestCgroupUnsupported checks that WithCgroup off Linux fails Start with
// the package's one "unsupported" error, which both checks find: an httpapi
// server answers 501 to it, not 500.
func TestCgroupUnsupported(t *testing.T) {
	t.Parallel()
	m := agentproc.New(agentproc.WithCgroup("/sys/fs/cgroup"))
	defer m.Close()
	p, err := m.Start(t.Context(), agentproc.Request{Command: "echo unreachable"})
	if p != nil {
		t.Fatalf("Start with WithCgroup started %s, want nothing", p.ID())
	}
	if !errors.Is(err, agentproc.ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Start: got %v, want an error matching agentproc.ErrUnsupported and errors.ErrUnsupported", err)
	}
}
