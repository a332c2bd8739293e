package agentproc_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// Tests of the eighth attack review (the seventh's fixes):
// docs/sandbox-threats.md, "Eighth attack review (the seventh's fixes)".

// TestAttackTracedThreadHangsWait: reapTraced handles a shell that asks
// the host to trace it and stops. A thread other than the main one may ask
// too: PTRACE_TRACEME makes the process's parent, the host, that thread's
// tracer. When the thread exits it stays a zombie until its tracer waits
// for it (by its thread ID), and the shell, its thread group leader, is
// not reported to its parent's wait before all its threads are reaped: the
// host's wait for the shell never returns, though nothing of the tree runs:
// Wait, Stop and Manager.Close hang until the host exits (sandboxed or
// not; the detached runner waits the same way). The test, being the host,
// reaps the thread itself when the wait has hung, so that it ends.
func TestAttackTracedThreadHangsWait(t *testing.T) {
	t.Skip("escape found by attack review, not fixed: a thread of the shell that asks the host to trace it (PTRACE_TRACEME) and exits stays a zombie only its tracer may reap, and the host's wait for the shell, Stop and Manager.Close hang for good")
	requireSandbox(t)
	ws := t.TempDir()
	compileC(t, ws, "tracethread", `#include <sys/ptrace.h>
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
}`, "-pthread")
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
			// The test is the host: reap the traced thread as its tracer,
			// which lets the shell be reported and the Manager close.
			tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
			for _, e := range tasks {
				if tid, _ := strconv.Atoi(e.Name()); tid != pid && tid > 0 {
					_, werr := unix.Wait4(tid, nil, unix.WALL|unix.WNOHANG, nil)
					t.Logf("sandbox %v: reaped traced thread %d: %v", sb != nil, tid, werr)
				}
			}
			if _, err := p.Wait(testContext(t)); err != nil {
				t.Fatalf("sandbox %v: Wait after the thread's reap: %v", sb != nil, err)
			}
			continue
		}
		if !strings.Contains(p.Output().Text, "thread traced and gone") {
			t.Fatalf("sandbox %v: output %q, want the thread traced", sb != nil, p.Output().Text)
		}
		t.Logf("sandbox %v: %s, code %d", sb != nil, info.Reason, exitCode(info))
	}
}
