//go:build unix && !aix

package agentproc

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// relayEnv makes the test binary take the darwin PTY path (ptyRelay) on any
// Unix, so that TestRelayTTYSuite can run the whole TTY suite through it.
const relayEnv = "AGENTPROC_TEST_PTY_RELAY"

func init() {
	if os.Getenv(relayEnv) == "1" {
		ptyRelay = true
	}
}

func TestRelayMaster(t *testing.T) {
	t.Parallel()
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	out, err := relayMaster(master)
	if err != nil {
		t.Fatalf("relayMaster: %v", err)
	}
	defer out.Close()
	if _, err := slave.Write([]byte("hello\n")); err != nil {
		t.Fatalf("write slave: %v", err)
	}
	_ = out.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 0, 16)
	for !strings.Contains(string(got), "hello\r\n") {
		b := make([]byte, 16)
		n, err := out.Read(b)
		got = append(got, b[:n]...)
		if err != nil {
			t.Fatalf("read relay: got %q, %v, want \"hello\\r\\n\"", got, err)
		}
	}
	// The relay's end is a socket: a deadline works on it.
	if err := out.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatalf("SetReadDeadline: %v", err)
	}
	if _, err := out.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read with nothing written: got %v, want os.ErrDeadlineExceeded", err)
	}
	// No process holds the slave any more: the relay reaches EOF.
	_ = slave.Close()
	_ = out.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(out); err != nil {
		t.Errorf("read to the end: got %q, %v, want EOF", b, err)
	}
	// And it closed the master it owns (before its end of the pair, so
	// EOF above means the master is closed).
	if _, err := master.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("master after the relay ended: write got %v, want os.ErrClosed", err)
	}
}

// TestRelayTTYSuite runs every TTY test again in a child test binary with
// the darwin PTY path (blocking master, relayed output) switched on, so the
// path macOS takes is exercised on Linux too. goleak in the child's
// TestMain checks that no relay goroutine outlives its process.
func TestRelayTTYSuite(t *testing.T) {
	if ptyRelay {
		t.Skip("already on the relay path")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTTY", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), relayEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("TTY suite through the relay: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "--- PASS: TestTTY"); n < 5 {
		t.Errorf("TTY tests passed through the relay: got %d, want all of them (at least 5)\n%s", n, out)
	}
}
