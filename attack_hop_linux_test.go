package agentproc_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// hopperSource is a program that leaves its session and then, given the
// argument "hop", forks every interval and lets the parent exit, so that
// the process lives on under a new PID (and a new process group) each
// time; given "stay" it sleeps under one PID. Each process writes its PID
// to ALIVE; it exits once STOP exists (the test's cleanup).
const hopperSource = `#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
	int hop = argc > 3 && strcmp(argv[1], "hop") == 0;
	const char *alive = argv[2], *stop = argv[3];
	setsid();
	for (;;) {
		if (access(stop, F_OK) == 0) _exit(0);
		if (hop) {
			pid_t p = fork();
			if (p > 0) _exit(0);
			if (p == 0) setpgid(0, 0);
		}
		int fd = open(alive, O_WRONLY|O_CREAT|O_TRUNC, 0644);
		if (fd >= 0) { dprintf(fd, "%d\n", getpid()); close(fd); }
		usleep(2000);
	}
}
`

// TestAttackForkHopperOutlivesClose: without a cgroup, Stop and Close find
// a tree's processes by a sweep of /proc (as root: every process in the
// tree's mount namespace; otherwise the marker) and kill each by PID. A
// process that forks every 2 ms and lets its parent exit is under another
// PID by the time a pass has read its entry of the /proc listing, so the
// pass never lists it, and it ran on after Close (still confined). The
// sweep now probes the PIDs handed out since the pass listed /proc, just
// before it signals (containment.tail), and a round that found a process
// new to the sweep gone before its signal does not end the sweep. Runs as
// the unprivileged user too (TestSandboxUnprivileged). The control is the
// same program under one PID, which Close kills.
func TestAttackForkHopperOutlivesClose(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	compileC(t, ws, "hop", hopperSource, "-O2")
	const forks = `i=0; while [ $i -lt 300 ]; do /bin/true; i=$((i+1)); done; `
	for _, mode := range []string{"stay", "hop"} {
		t.Run(mode, func(t *testing.T) {
			alive, stop := filepath.Join(ws, mode+".alive"), filepath.Join(ws, mode+".stop")
			t.Cleanup(func() { stopHopper(t, alive, stop) })
			m := agentproc.New(agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithPipeDrain(escapeDrain))
			p := mustStart(t, m, agentproc.Request{WorkDir: ws,
				Command: "./hop " + mode + " " + alive + " " + stop + " > /dev/null 2>&1 & " + forks + "echo ready; exec sleep 1000"})
			waitForOutput(t, p, regexp.MustCompile(`ready`))
			if err := m.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			// Whatever runs on rewrites its file within 2 ms; give it 200.
			before, _ := os.ReadFile(alive)
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for range 40 {
				if now, _ := os.ReadFile(alive); len(now) > 0 && string(now) != string(before) {
					t.Fatalf("after Close: got the hopper still running (PID %s), want it killed", strings.TrimSpace(string(now)))
				}
				<-tick.C
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(before))); err == nil && alive2(pid) {
				t.Fatalf("after Close: got process %d running, want it killed", pid)
			}
		})
	}
}

// alive2 reports whether pid runs the hopper and is not a zombie.
func alive2(pid int) bool {
	comm, err := agentproc.ProcFile(pid, "comm")
	if err != nil || strings.TrimSpace(string(comm)) != "hop" {
		return false
	}
	state, ok := agentproc.ProcState(pid)
	return ok && state != 'Z'
}

// stopHopper makes the hopper exit (it looks for stop at each step) and
// waits, under the test deadline, until its file stops changing.
func stopHopper(t *testing.T, alive, stop string) {
	t.Helper()
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Error(err)
		return
	}
	ctx := testContext(t)
	last, quiet := "", 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for quiet < 20 {
		now, _ := os.ReadFile(alive)
		if string(now) == last {
			quiet++
		} else {
			last, quiet = string(now), 0
		}
		select {
		case <-ctx.Done():
			t.Errorf("the hopper did not stop: last PID %q", last)
			return
		case <-tick.C:
		}
	}
}
