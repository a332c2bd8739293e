package taskstats

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// open opens a Listener or skips where the kernel refuses one (not root,
// another user or PID namespace), naming why.
func open(t *testing.T) *Listener {
	t.Helper()
	l, err := Open()
	if errors.Is(err, os.ErrPermission) || errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("no exit records here: %v", err)
	}
	if err != nil {
		if os.Geteuid() == 0 {
			t.Fatalf("Open as root: got %v, want a listener", err)
		}
		t.Skipf("no exit records here: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestPeakOfChildAndReapedDescendant: the peak of a child is its own mark
// (dd run as the child itself) or that of a descendant it reaped (dd run
// by a shell that goes on), each within 16 MiB above dd's 64 MiB buffer.
func TestPeakOfChildAndReapedDescendant(t *testing.T) {
	t.Parallel()
	l := open(t)
	for _, script := range []string{
		"exec dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null",
		"dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null; true",
	} {
		m := l.Mark()
		cmd := exec.Command("sh", "-c", script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		l.Watch(cmd.Process.Pid, m)
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		peak, ok := l.Peak(ctx, cmd.Process.Pid, m)
		cancel()
		if !ok || peak < 64<<20 || peak > 80<<20 {
			t.Errorf("%q: got peak %d (%v), want 64 to 80 MiB", script, peak, ok)
		}
	}
}
