package agentproc_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// Tests of the eighth attack review (the seventh's fixes):
// docs/sandbox-threats.md, "Eighth attack review (the seventh's fixes)".

// tracedThreadSource is a program whose second thread asks its parent to
// trace it (PTRACE_TRACEME) and exits; then the program exits.
const tracedThreadSource = `#include <sys/ptrace.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static void *run(void *arg) {
	(void)arg;
	if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) { perror("traceme"); exit(3); }
	return 0;
}
int main(void) {
	pthread_t th;
	pthread_create(&th, 0, run, 0);
	pthread_join(th, 0);
	printf("thread traced and gone\n"); fflush(stdout);
	return 0;
}`

// TestAttackTracedThreadHangsWait: reapTraced handles a shell that asks
// the host to trace it and stops. A thread other than the main one may ask
// too: PTRACE_TRACEME makes the process's parent, the host, that thread's
// tracer. When the thread exits it stays a zombie until its tracer waits
// for it (by its thread ID), and the shell, its thread group leader, is
// not reported to its parent's wait before all its threads are reaped: the
// host's wait for the shell never returned, though nothing of the tree ran:
// Wait, Stop and Manager.Close hung until the host exited (sandboxed or
// not; the detached runner waited the same way). The host now reaps such
// threads once the output has ended (reapTracedThreads). Where the test
// finds the wait hung it reaps the thread itself, so that it ends. The
// second case has a background child hold the output: Stop kills it, and
// the wait ends then.
func TestAttackTracedThreadHangsWait(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	compileC(t, ws, "tracethread", tracedThreadSource, "-pthread")
	for _, sb := range []*agentproc.Sandbox{nil, agentproc.WorkspaceSandbox(ws)} {
		m := newManager(t, agentproc.WithRedaction(false))
		p := mustStart(t, m, agentproc.Request{WorkDir: ws, Command: "exec ./tracethread", Sandbox: sb})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		info, err := p.Wait(ctx)
		cancel()
		if err != nil {
			pid := p.Info().PID
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
			state := ""
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "State") || strings.HasPrefix(l, "Threads") {
					state += l + "; "
				}
			}
			t.Errorf("sandbox %v: Wait: got %v (output %q, shell %s), want the end within 10s", sb != nil, err, p.Output().Text, state)
			reapThreads(t, pid)
			if _, err := p.Wait(testContext(t)); err != nil {
				t.Fatalf("sandbox %v: Wait after the thread's reap: %v", sb != nil, err)
			}
			continue
		}
		if !strings.Contains(p.Output().Text, "thread traced and gone") {
			t.Fatalf("sandbox %v: output %q, want the thread traced", sb != nil, p.Output().Text)
		}
		t.Logf("sandbox %v: %s, code %d", sb != nil, info.Reason, exitCode(info))
		p = mustStart(t, m, agentproc.Request{WorkDir: ws, Command: "setsid sleep 60 & exec ./tracethread", Sandbox: sb})
		waitForOutput(t, p, regexp.MustCompile("thread traced and gone"))
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		info, err = p.Stop(ctx)
		cancel()
		if err != nil {
			t.Errorf("sandbox %v, a child holding the output: Stop: got %v, want the end within 10s", sb != nil, err)
			reapThreads(t, p.Info().PID)
			continue
		}
		t.Logf("sandbox %v, a child holding the output: Stop: %s, leftovers %d", sb != nil, info.Reason, info.Leftovers)
	}
}

// reapThreads reaps pid's traced threads as their tracer, the test being
// the host, where the Manager did not.
func reapThreads(t *testing.T, pid int) {
	t.Helper()
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, e := range tasks {
		if tid, _ := strconv.Atoi(e.Name()); tid != pid && tid > 0 {
			_, werr := unix.Wait4(tid, nil, unix.WALL|unix.WNOHANG, nil)
			t.Logf("reaped traced thread %d: %v", tid, werr)
		}
	}
}

// TestAttackTracedThreadHangsDetached: the same thread in a detached
// process, whose shell's parent and tracer is the runner: the runner's
// wait hung, and with it the process's end (Wait). Where it hangs the
// test kills the runner, so that the shell's zombie goes to init.
func TestAttackTracedThreadHangsDetached(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	compileC(t, ws, "tracethread", tracedThreadSource, "-pthread")
	for _, sb := range []*agentproc.Sandbox{nil, agentproc.WorkspaceSandbox(ws)} {
		m := newManager(t, agentproc.WithStateDir(t.TempDir()))
		p := mustStart(t, m, agentproc.Request{WorkDir: ws, Command: "exec ./tracethread", Sandbox: sb, Detach: true})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		info, err := p.Wait(ctx)
		cancel()
		if err != nil {
			t.Errorf("sandbox %v, detached: Wait: got %v (output %q), want the end within 10s", sb != nil, err, p.Output().Text)
			if runner := ppidOf(t, p.Info().PID); runner > 1 {
				_ = unix.Kill(runner, unix.SIGKILL)
			}
			_, _ = p.Wait(testContext(t))
			continue
		}
		if !strings.Contains(p.Output().Text, "thread traced and gone") {
			t.Fatalf("sandbox %v, detached: output %q, want the thread traced", sb != nil, p.Output().Text)
		}
		t.Logf("sandbox %v, detached: %s, code %d", sb != nil, info.Reason, exitCode(info))
	}
}

// TestAttackTracedThreadShellRunsOn: the reaper of traced threads does not
// look at a shell that closed its output and runs on. It used to list the
// shell's threads on a timer from the output's end (5 ms, then less often
// up to once a second) for the shell's whole life; it now asks the kernel
// at each SIGCHLD whether the shell's process group holds an exited
// tracee of the host, and lists the threads only then. Fifty short
// children started meanwhile let time pass and send the host SIGCHLDs.
func TestAttackTracedThreadShellRunsOn(t *testing.T) {
	ended, looks, stop := agentproc.WatchTracedThreads()
	defer stop()
	m := newManager(t, agentproc.WithRedaction(false))
	p := mustStart(t, m, agentproc.Request{Command: "exec >&- 2>&-; exec sleep 100"})
	pid := p.Info().PID
	deadline := time.After(10 * time.Second)
	for got := 0; got != pid; {
		select {
		case got = <-ended:
		case <-deadline:
			t.Fatalf("the output of shell %d did not end within 10s", pid)
		}
	}
	for range 50 {
		if err := exec.Command("true").Run(); err != nil {
			t.Fatal(err)
		}
	}
	if !p.Info().Running {
		t.Fatalf("the shell ended before the check: %+v", p.Info())
	}
	if n := looks(pid); n != 0 {
		t.Errorf("looks at the running shell's threads: got %d, want 0", n)
	}
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if n := looks(pid); n != 0 {
		t.Errorf("looks at the shell's threads by its end: got %d, want 0", n)
	}
}
