package agentproc_test

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// tidReuseSource is a shell whose process group holds, once its output
// has ended, an exited child of the host that is not its thread (a
// CLONE_PARENT child, which makes the reaper of traced threads list the
// threads), an exited traced thread, and an idle thread that leaves at
// SIGUSR1 (tgkill) and whose ID is then free. Once the idle thread has
// gone the program exits.
const tidReuseSource = `#define _GNU_SOURCE
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static char stack[1 << 16];
static void leave(int sig) { (void)sig; syscall(SYS_exit, 0); }
static int quick(void *arg) { (void)arg; return 0; }
static void *idle(void *arg) { (void)arg; for (;;) pause(); return 0; }
static void *traced(void *arg) { (void)arg; ptrace(PTRACE_TRACEME, 0, 0, 0); return 0; }
int main(void) {
	pthread_t i, t;
	signal(SIGUSR1, leave);
	pthread_create(&i, 0, idle, 0);
	int c = clone(quick, stack + sizeof stack, CLONE_PARENT | SIGCHLD, 0);
	pthread_create(&t, 0, traced, 0);
	pthread_join(t, 0);
	printf("parent-child %d\n", c); fflush(stdout);
	close(1); close(2);
	pthread_join(i, 0);
	return 0;
}`

// TestAttackTracedTIDReused: the reaper of traced threads used to read the
// shell's thread IDs from /proc/PID/task and then wait4 each by number
// (WNOHANG|__WALL). A thread that left after the listing frees its ID; a
// new child of the host that took it and exited before the wait4 was
// reaped there, and its own wait (another Start's shell, here an os/exec
// child of the test, which is the host) lost its status. A PID wrap
// between two system calls cannot be forced in a test's time, so the race
// is driven by a test hook that runs between the listing and the waits:
// it sends the idle thread away, starts `true` with the freed ID (through
// ns_last_pid, root) and waits for it to exit. The reaper now reaps only
// an ID the kernel names as exited, once it is found to be a thread of the
// shell. Unsandboxed: the reaper is the host's, and a sandboxed tree may
// not use CLONE_PARENT.
func TestAttackTracedTIDReused(t *testing.T) {
	requireRoot(t)
	ws := t.TempDir()
	compileC(t, ws, "tidreuse", tidReuseSource, "-pthread")
	var once sync.Once
	planted := make(chan *exec.Cmd, 1)
	failed := make(chan error, 1)
	stop := agentproc.WatchTracedListing(func(pid int, tids []int) {
		for _, tid := range tids {
			if threadState(pid, tid) != "S" {
				continue // the traced zombie, or a thread in flight
			}
			once.Do(func() {
				cmd, err := plantExitedChild(pid, tid)
				if err != nil {
					failed <- err
					return
				}
				planted <- cmd
			})
		}
	})
	defer stop()
	m := newManager(t, agentproc.WithRedaction(false))
	p := mustStart(t, m, agentproc.Request{WorkDir: ws, Command: "exec ./tidreuse"})
	var cmd *exec.Cmd
	select {
	case cmd = <-planted:
	case err := <-failed:
		t.Fatal(err)
	case <-time.After(5 * time.Second):
		t.Fatalf("the reaper did not list an idle thread within 5s (output %q)", p.Output().Text)
	}
	info := mustWait(t, p)
	if m := regexp.MustCompile(`parent-child (\d+)`).FindStringSubmatch(p.Output().Text); m != nil {
		c, _ := strconv.Atoi(m[1])
		_, _ = unix.Wait4(c, nil, unix.WALL|unix.WNOHANG, nil) // the test is its parent
	}
	err := cmd.Wait()
	if err != nil || cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("the host's child %d with the freed thread ID: Wait got %v, want its exit 0", cmd.Process.Pid, err)
	}
	t.Logf("shell: %s, code %d", info.Reason, exitCode(info))
}

// threadState returns the state letter of thread tid of pid, or "".
func threadState(pid, tid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}

// plantExitedChild sends thread tid of pid away (SIGUSR1, whose handler
// ends the thread), then starts `true` as a child of the test with the
// freed ID and returns once it has exited, unreaped.
func plantExitedChild(pid, tid int) (*exec.Cmd, error) {
	if err := unix.Tgkill(pid, tid, unix.SIGUSR1); err != nil {
		return nil, err
	}
	if !until(2*time.Second, func() bool { return threadState(pid, tid) == "" }) {
		return nil, errors.New("the idle thread did not leave within 2s")
	}
	for range 20 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(tid-1)), 0); err != nil {
			return nil, err
		}
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		if cmd.Process.Pid != tid {
			_ = cmd.Wait()
			continue // a thread or process elsewhere took it first
		}
		if !until(2*time.Second, func() bool { return threadState(tid, tid) == "Z" }) {
			return nil, errors.New("the planted child did not exit within 2s")
		}
		return cmd, nil
	}
	return nil, errors.New("could not start a child with the freed thread ID")
}

// until polls cond every millisecond until it holds or d has passed.
func until(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
