package agentproc_test

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentproc/agentproc"
)

// Tests of the ninth attack review (root): docs/sandbox-threats.md,
// "Ninth attack review (root)".

// TestAttackRecoveryKillsReusedGroup: recovery stops a dead host's trees
// with a grace period: SIGTERM in a first round, a wait of up to the grace
// period for what it signalled, then SIGKILL to the process groups it
// found led by a process carrying a tree's marker, and rounds of SIGKILL.
// Those groups were remembered by number: once the leader and its group
// were gone, a new process that took the leader's PID and made a group of
// its own (a shell's job, a daemon's setsid, any tree's leader) was killed
// with its whole group, though it carried no marker, by kill(-PGID) and by
// the rounds' "member of a tree's group" rule. A tree arranges it: its
// group leader exits at the SIGTERM, a member that ignores SIGTERM holds
// the wait open for the grace period (5 s by default), and it forks until
// the kernel's last PID is the one before the leader's, so that the next
// process made on the machine gets it: with recovery running beside the
// new Manager's first Starts, often the agent's next command. Here the
// test plays the tree (a leader with the marker, a holdout) and, as root,
// hands the leader's PID to the victim through ns_last_pid, in place of
// the tree's forks. Now a group counts only while its leader is the
// process found leading it (same PID and start time).
func TestAttackRecoveryKillsReusedGroup(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	id := uuid.NewString()
	// start runs command with the tree's marker in a process group of its
	// own, waits for its first line and returns its PID, a pidfd for it and
	// a channel closed once it has been reaped.
	start := func(command string) (int, int, <-chan struct{}) {
		cmd := exec.Command("sh", "-c", command)
		cmd.Env = append(os.Environ(), agentproc.MarkerEnv+"="+id)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal(err)
		}
		reaped := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(reaped)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-reaped
		})
		return cmd.Process.Pid, pinPIDs(t, []int{cmd.Process.Pid})[0], reaped
	}
	// The tree's group leader, which a SIGTERM ends, and a holdout in a
	// group of its own that ignores it.
	victim, _, leaderReaped := start(`echo ready; exec sleep 300`)
	_, holdout, _ := start(`trap "" TERM; echo ready; exec sleep 300`)
	writeRecord(t, dir, id, nil)

	// A grace period of 1 s, not the default 5 s, is enough: the victim
	// takes the PID within milliseconds of the leader's reap, and the
	// check below fails the test where the SIGKILL round came first.
	m := newManager(t, agentproc.WithStateDir(dir), agentproc.WithGracePeriod(time.Second))
	select {
	case <-leaderReaped: // SIGTERMed by recovery, and reaped: its PID is free
	case <-time.After(10 * time.Second):
		t.Fatal("the tree's leader got no SIGTERM within 10 s, want recovery's")
	}
	for try := 0; ; try++ {
		if got := startGroupWithPID(t, victim); got == victim {
			break
		}
		if try == 10 {
			t.Skipf("another fork took PID %d first, 10 times", victim)
		}
	}
	victimFD := pinPIDs(t, []int{victim})[0]
	if waitExited([]int{holdout}, 0) != 1 {
		t.Fatal("the holdout got killed before the victim took the PID, want the victim in place within the grace period")
	}
	if _, err := m.Recovered(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if left := waitExited([]int{holdout}, 5*time.Second); left != 0 {
		t.Errorf("the tree's holdout: got alive after recovery, want killed")
	}
	if left := waitExited([]int{victimFD}, 0); left != 1 {
		t.Errorf("process %d (no marker, a group of its own, the PID of the tree's dead leader): got killed by recovery, want left alone", victim)
	}
}

// TestAttackRootReadsTraceBuffer: the kernel's trace buffer
// (/sys/kernel/tracing/trace, trace_pipe, each instance's) is root's 0640
// and 0440: a root tree, uid 0, owns it and read whatever the host traced
// (a kprobe or uprobe an operator left on, trace-cmd's or bpftrace's
// events: command lines, file names, the strings a probe copies), which
// then reached the model. The test writes a line through trace_marker, as
// the host; the control reads it back unsandboxed. WorkspaceSandbox now
// hides /sys/kernel/tracing and /sys/kernel/debug (root's: a tree without
// root reads neither).
func TestAttackRootReadsTraceBuffer(t *testing.T) {
	requireRootSandbox(t)
	const marker = "/sys/kernel/tracing/trace_marker"
	line := "agentproc-trace-" + uuid.NewString()[:8]
	if err := os.WriteFile(marker, []byte(line+"\n"), 0); err != nil {
		t.Skipf("cannot write %s (tracefs not mounted there?): %v", marker, err)
	}
	ws := t.TempDir()
	m := newManager(t, agentproc.WithRedaction(false))
	cmd := "grep -c " + line + " /sys/kernel/tracing/trace; echo done"
	for _, sb := range []*agentproc.Sandbox{nil, agentproc.WorkspaceSandbox(ws)} {
		p := mustStart(t, m, agentproc.Request{WorkDir: ws, Command: cmd, Sandbox: sb})
		mustWait(t, p)
		out := p.Output().Text
		read := regexp.MustCompile(`(?m)^[1-9][0-9]*$`).MatchString(out)
		switch {
		case sb == nil && !read:
			t.Skipf("control: the host's trace buffer unsandboxed got %q, want the line (tracing off?)", out)
		case sb != nil && read:
			t.Errorf("sandboxed: the host's trace buffer got read (%q), want refused", strings.TrimSpace(out))
		}
	}
}
