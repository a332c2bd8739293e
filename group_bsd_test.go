//go:build darwin || freebsd

package agentproc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCountGroupSkipsZombies leaves an exited group leader unreaped: the
// kernel still reports the group to kill(-pgid, 0), and countGroup must
// count no one. Not run here (Linux CI); compiled by make cross.
func TestCountGroupSkipsZombies(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "read _")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	defer func() { _ = cmd.Wait() }()
	if n, ok := countGroup(pgid); !ok || n != 1 {
		t.Fatalf("countGroup of a running leader: got %d, %v, want 1, true", n, ok)
	}
	// Closing stdin ends the shell; it stays a zombie until Wait.
	_ = in.Close()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		n, ok := countGroup(pgid)
		if !ok {
			t.Fatalf("countGroup: sysctl failed")
		}
		if n == 0 {
			break
		}
		select {
		case <-tick.C: // the exit has no event we can wait on without reaping
		case <-deadline:
			t.Fatalf("countGroup after the leader exited: got %d, want 0", n)
		}
	}
	if err := unix.Kill(-pgid, 0); err != nil {
		t.Errorf("kill(-pgid, 0) with the zombie unreaped: got %v, want nil (else this test shows nothing)", err)
	}
}
