package agentproc_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/agentproc/agentproc"
)

// freezableMount mounts a fresh ext4 image on a loop device and returns a
// function that freezes it (fsfreeze -f), the stand-in for a dead network
// mount: every call that writes to it blocks in the kernel until it is
// thawed. The file system is always thawed, before any cleanup registered
// ahead of the freeze runs, and unmounted by t.Cleanup. The
// test is skipped, with the reason, when it cannot run here.
func freezableMount(t *testing.T) (dir string, freeze func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount and freeze a file system")
	}
	for _, tool := range []string{"mkfs.ext4", "fsfreeze", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (e2fsprogs, util-linux): %v", tool, err)
		}
	}
	tmp := t.TempDir()
	img, mnt := filepath.Join(tmp, "fs.img"), filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("truncate", "-s", "32M", img).CombinedOutput(); err != nil {
		t.Fatalf("truncate: %v: %s", err, out)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a loop device here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// Lazy: a writer released by the thaw may still hold a file.
		if out, err := exec.Command("umount", "-l", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount: %v: %s", err, out)
		}
	})
	return mnt, func() {
		t.Helper()
		if out, err := exec.Command("fsfreeze", "-f", mnt).CombinedOutput(); err != nil {
			t.Fatalf("fsfreeze -f: %v: %s", err, out)
		}
		// Registered last, so it runs first: everything the test set up
		// before the freeze is torn down after the thaw.
		t.Cleanup(func() {
			if out, err := exec.Command("fsfreeze", "-u", mnt).CombinedOutput(); err != nil {
				t.Errorf("fsfreeze -u: %v: %s", err, out)
			}
		})
	}
}

// within runs fn and fails the test if it has not returned after limit. A
// call that hangs is left behind; the thaw in t.Cleanup releases it.
func within(t *testing.T, limit time.Duration, what string, fn func()) time.Duration {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		fn()
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-done:
		return time.Since(start)
	case <-timer.C:
		t.Fatalf("%s: still blocked after %v on the frozen log directory", what, limit)
		return 0
	}
}

// A frozen output log directory costs each caller at most the documented
// bound, and most of them nothing: Get and List do not wait for a removal,
// Start fails (naming the log) rather than run a command without its log,
// an exit is published, and Close returns.
func TestOutputLogFrozenDir(t *testing.T) {
	t.Parallel()
	mnt, freeze := freezableMount(t)
	const bound = time.Second
	// Generous for a loaded 2-core machine; without the bound these calls
	// block until the thaw in t.Cleanup.
	const slack = 3 * time.Second
	clk := quartz.NewMock(t)
	logs := filepath.Join(mnt, "logs")
	m := agentproc.New(agentproc.WithClock(clk), agentproc.WithRetention(time.Minute, 256),
		agentproc.WithOutputLog(logs, 0), agentproc.WithLogDirBound(bound),
		agentproc.WithGracePeriod(testTimeout))
	// Registered before the freeze, so it runs after the thaw.
	t.Cleanup(func() { _ = m.Close() })

	exited := mustStart(t, m, agentproc.Request{Command: "echo early"})
	mustWait(t, exited)
	// It writes once the directory is frozen, so its log writer hangs.
	late := mustStart(t, m, agentproc.Request{Command: "read x; echo late", Stdin: true})
	server := mustStart(t, m, agentproc.Request{Command: "echo up; exec sleep 1000"})
	if _, err := server.WaitOutput(testContext(t), 0); err != nil { // "up": the shell runs
		t.Fatal(err)
	}

	freeze()
	// Retention now drops the exited process, which removes its log: an
	// unlink on the frozen directory.
	clk.Advance(time.Minute)
	within(t, slack, "List", func() { _ = m.List() })
	within(t, slack, "Get", func() {
		if _, err := m.Get(server.ID()); err != nil {
			t.Errorf("Get(server): %v", err)
		}
	})

	// The exit of a process whose log writer hangs is published within the
	// bound.
	if _, err := late.WriteStdin(t.Context(), []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound+slack)
	defer cancel()
	if info, err := late.Wait(ctx); err != nil || exitCode(info) != 0 {
		t.Fatalf("Wait(late): got (%+v, %v), want exit 0 within %v", info, err, bound+slack)
	}
	if got := late.Output().Text; got != "late\n" {
		t.Errorf("Output(late): got %q, want %q", got, "late\n")
	}

	// A Start cannot open its log: it fails, naming the log, and nothing
	// runs. The directory now counts as hung, so it fails at once.
	ran := filepath.Join(t.TempDir(), "ran")
	var startErr error
	within(t, bound+slack, "Start", func() {
		_, startErr = m.Start(ctx, agentproc.Request{Command: "touch " + ran})
	})
	if startErr == nil || !strings.Contains(startErr.Error(), logs) || !errors.Is(startErr, os.ErrDeadlineExceeded) {
		t.Errorf("Start on the frozen directory: got %v, want an error naming %s wrapping os.ErrDeadlineExceeded", startErr, logs)
	}
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("the command of the failed Start ran (stat: %v)", err)
	}
	for _, info := range m.List() {
		if strings.Contains(info.Command, ran) {
			t.Errorf("List holds the failed Start: %+v", info)
		}
	}

	// Close stops the server and returns although the log removals hang.
	if d := within(t, bound+slack, "Close", func() { _ = m.Close() }); d > bound+slack {
		t.Errorf("Close took %v, want at most %v", d, bound+slack)
	}
	if info := server.Info(); info.Running || info.Reason != agentproc.ReasonShutdown {
		t.Errorf("server after Close: got %+v, want stopped by shutdown", info)
	}
}
