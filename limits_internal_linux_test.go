package agentproc

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 64 << 20: "64 MiB", 3 << 29: "1.5 GiB", 1 << 40: "1 TiB",
	} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d): got %q, want %q", n, got, want)
		}
	}
	if got := (Limits{Memory: 64 << 20, Procs: 64, CPU: 0.25}).String(); got != "memory 64 MiB, procs 64, cpu 0.25" {
		t.Errorf("Limits.String: got %q", got)
	}
}

// TestCgroupRemovalAfterWait holds the removal of a finished tree's
// cgroups: Wait returns meanwhile, the cgroups are still there until the
// removal goes on, and Close waits for it, leaving none behind.
func TestCgroupRemovalAfterWait(t *testing.T) {
	// Not parallel: the hook holds every tree's removal.
	held, hold := make(chan struct{}, 1), make(chan struct{})
	removeCgroupsHook = func([]string) {
		held <- struct{}{}
		<-hold
	}
	t.Cleanup(func() { removeCgroupsHook = nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := New()
	closed := false
	defer func() {
		if !closed {
			close(hold)
			_ = m.Close()
		}
	}()
	p, err := m.Start(ctx, Request{Command: "true", Limits: Limits{Procs: 64}})
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("limits cannot be held here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dirs := p.sup.ctr.cg.Dirs()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait with the cgroups' removal held: got %v, want the exit", err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the removal never began")
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("cgroup %s while its removal is held: got %v, want it there", d, err)
		}
	}
	close(hold)
	closed = true
	if err := m.Close(); err != nil {
		t.Fatalf("Close: got %v, want nil", err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s after Close: got %v, want removed", d, err)
		}
	}
}
