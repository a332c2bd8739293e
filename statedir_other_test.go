//go:build !linux

package agentproc_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentproc/agentproc"
)

// TestStateDirUnsupported: off Linux, a state dir and a detached process
// are refused with ErrUnsupported naming the platform; nothing runs.
func TestStateDirUnsupported(t *testing.T) {
	t.Parallel()
	// Never created: the option is refused before anything touches it
	// (and t.TempDir's cleanup fails under Wine).
	dir := filepath.Join(os.TempDir(), "agentproc-state-"+uuid.NewString())
	m := newManager(t, agentproc.WithStateDir(dir))
	_, err := m.Start(agentproc.Request{Command: "echo hi"})
	if !errors.Is(err, agentproc.ErrUnsupported) || !strings.Contains(err.Error(), runtime.GOOS) {
		t.Errorf("Start with a state dir: got %v, want ErrUnsupported naming %s", err, runtime.GOOS)
	}
	if _, rerr := m.Recovered(testContext(t)); !errors.Is(rerr, agentproc.ErrUnsupported) {
		t.Errorf("Recovered: got %v, want ErrUnsupported", rerr)
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("state dir: got %v, want it never created", serr)
	}
	plain := newManager(t)
	_, err = plain.Start(agentproc.Request{Command: "echo hi", Detach: true})
	if !errors.Is(err, agentproc.ErrUnsupported) || !strings.Contains(err.Error(), runtime.GOOS) {
		t.Errorf("Start with Detach: got %v, want ErrUnsupported naming %s", err, runtime.GOOS)
	}
}
