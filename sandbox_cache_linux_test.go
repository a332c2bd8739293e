package agentproc

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestSandboxCacheBounded checks that a Manager keeps at most its limit of
// built policies (each holds descriptors and maybe a mount namespace) and
// that Starts beyond it still run, each with a policy of its own that is
// released with it.
func TestSandboxCacheBounded(t *testing.T) {
	if f := SandboxSupport(); !f.Supported {
		t.Skipf("no sandbox here: %s", f)
	}
	// Not parallel: it counts this process's descriptors.
	m := New()
	m.sandbox.cache.limit = 2
	defer m.Close()
	fds := func() int {
		ents, _ := os.ReadDir("/proc/self/fd")
		return len(ents)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 5 {
		ws := t.TempDir()
		p, err := m.Start(ctx, Request{Command: "true", WorkDir: ws, Sandbox: WorkspaceSandbox(ws)})
		if err != nil {
			t.Fatal(err)
		}
		if info, err := p.Wait(ctx); err != nil || info.ExitCode == nil || *info.ExitCode != 0 {
			t.Fatalf("start %d: %v %+v", i, err, info)
		}
	}
	m.sandbox.cache.mu.Lock()
	n := len(m.sandbox.cache.built)
	m.sandbox.cache.mu.Unlock()
	if n > 2 {
		t.Errorf("%d policies kept, want at most the limit, 2", n)
	}
	before := fds()
	for range 3 {
		ws := t.TempDir()
		p, err := m.Start(ctx, Request{Command: "true", WorkDir: ws, Sandbox: WorkspaceSandbox(ws)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil { // the uncached policies are released by the exits, which Close waits for
		t.Fatal(err)
	}
	if after := fds(); after > before+1 {
		t.Errorf("%d descriptors open after 3 uncached starts, %d before: the policies were not released", after, before)
	}
}
