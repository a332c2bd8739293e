package agentproc

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// startSys starts command under shell the way the portable code does: one
// pipe for stdout and stderr, prepare before Start, started after. It
// returns the command, its sysProc and a channel that yields all output once
// the pipe reaches EOF.
func startSys(t *testing.T, shell []string, command string, env ...string) (*exec.Cmd, *sysProc, <-chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cmd := newShellCmd(ctx, shell, command)
	cmd.Env = append(os.Environ(), env...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("pipe: %v", err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	s := &sysProc{}
	if err := s.prepare(cmd, childAttrs{cgroupFD: -1}); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if err := cmd.Start(); err != nil {
		s.release()
		t.Fatalf("start: %v", err)
	}
	_ = w.Close()
	if err := s.started(cmd); err != nil {
		_ = cmd.Wait()
		s.release()
		t.Fatalf("started: %v", err)
	}
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		_ = r.Close()
		out <- string(b)
	}()
	t.Cleanup(s.release)
	// Registered last, so it runs first: a test that ends early (a skip
	// under Wine) must still reap the shell, or os/exec's context watcher
	// goroutine waits forever for a Wait that never comes.
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = s.signal(SignalKill)
			_ = cmd.Wait()
		}
	})
	return cmd, s, out
}

// waitCmd waits for cmd with a deadline, failing the test on timeout.
func waitCmd(t *testing.T, cmd *exec.Cmd, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		_ = cmd.Process.Kill()
		t.Fatalf("command did not exit within %v", d)
	}
}

func recvOutput(t *testing.T, out <-chan string, d time.Duration) string {
	t.Helper()
	select {
	case s := <-out:
		return s
	case <-time.After(d):
		t.Fatalf("output pipe did not reach EOF within %v", d)
		return ""
	}
}

func TestSysProcCmdQuoting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		command string
		want    string
	}{
		{`echo "a & b"`, "\"a & b\"\r\n"},
		{`echo one& echo two`, "one\r\ntwo\r\n"},
		{`echo "quoted" & echo ^<angle^>`, "\"quoted\" \r\n<angle>\r\n"},
		{`echo err 1>&2`, "err \r\n"},
	}
	for _, tt := range tests {
		cmd, s, out := startSys(t, defaultShell(), tt.command)
		waitCmd(t, cmd, 10*time.Second)
		if n := s.killLeftovers(); n != 0 {
			t.Errorf("%s: leftovers: got %d, want 0", tt.command, n)
		}
		if got := recvOutput(t, out, 10*time.Second); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.command, got, tt.want)
		}
	}
}

func TestSysProcExitCode(t *testing.T) {
	t.Parallel()
	cmd, s, out := startSys(t, defaultShell(), `exit /b 42`)
	waitCmd(t, cmd, 10*time.Second)
	recvOutput(t, out, 10*time.Second)
	if code, sig := exitStatus(cmd.ProcessState); code != 42 || sig != "" {
		t.Errorf("exitStatus: got (%d, %q), want (42, \"\")", code, sig)
	}
	// The job's accounting is not asserted: Wine reports zero CPU time, and
	// a check that a duration is not negative could never fail. usage is
	// still called, so a panic or a handle error would show.
	_, _ = s.usage(cmd.ProcessState)
}

func TestSysProcLeftoversKilled(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep := NewPIDReporter(t)
	deadline := time.Now().Add(20 * time.Second)
	// The barrier keeps the shell from exiting before the background
	// helper has reported.
	cmd, s, out := startSys(t, defaultShell(),
		`start /b "" "`+exe+`" & set "`+helperEnv+`=`+useHelper("barrier")+`" & "`+exe+`"`,
		helperEnv+"="+useHelper("sleep"), rep.Env())
	var child windows.Handle
	for range 2 {
		if mode, h := rep.Next(deadline); mode == "sleep" {
			child = h
		}
	}
	rep.Release()
	waitCmd(t, cmd, 10*time.Second)
	if !s.alive() {
		t.Fatalf("alive after shell exit: got false, want true (the helper is running)")
	}
	if n := s.killLeftovers(); n != 1 {
		t.Errorf("leftovers: got %d, want 1", n)
	}
	if !waitGone(child, 10*time.Second) {
		t.Fatalf("helper still running 10s after leftovers killed it")
	}
	recvOutput(t, out, 10*time.Second)
	if s.alive() {
		t.Errorf("alive after kill: got true, want false")
	}
}

func TestSysProcSignalKillTree(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep := NewPIDReporter(t)
	deadline := time.Now().Add(20 * time.Second)
	cmd, s, out := startSys(t, defaultShell(), `"`+exe+`"`, helperEnv+"="+useHelper("sleep"), rep.Env())
	_, child := rep.Next(deadline)
	if err := s.signal(SignalKill); err != nil {
		t.Fatalf("signal kill: %v", err)
	}
	waitCmd(t, cmd, 10*time.Second)
	if !waitGone(child, 10*time.Second) {
		t.Fatalf("helper still running 10s after kill")
	}
	recvOutput(t, out, 10*time.Second)
	if err := s.signal(SignalKill); err != errNoProcess {
		t.Errorf("signal to empty tree: got %v, want errNoProcess", err)
	}
}

func TestSysProcBreak(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep := NewPIDReporter(t)
	deadline := time.Now().Add(20 * time.Second)
	cmd, s, out := startSys(t, defaultShell(), `"`+exe+`"`, helperEnv+"="+useHelper("onbreak"), rep.Env())
	_, _ = rep.Next(deadline)
	if err := s.signal(SignalTerminate); err != nil {
		if underWine() {
			t.Skipf("Wine 8.0 cannot deliver console control events to a process group: %v", err)
		}
		t.Fatalf("signal terminate: %v", err)
	}
	waitCmd(t, cmd, 10*time.Second)
	got := recvOutput(t, out, 10*time.Second)
	if !strings.Contains(got, "got break") {
		t.Errorf("output: got %q, want it to contain %q", got, "got break")
	}
}

func TestSysProcRelease(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep := NewPIDReporter(t)
	deadline := time.Now().Add(20 * time.Second)
	cmd, s, out := startSys(t, defaultShell(), `"`+exe+`"`, helperEnv+"="+useHelper("sleep"), rep.Env())
	_, child := rep.Next(deadline)
	// Closing the only job handle must kill the tree (kill-on-job-close).
	s.release()
	waitCmd(t, cmd, 10*time.Second)
	if !waitGone(child, 10*time.Second) {
		t.Fatalf("helper still running 10s after the job handle was closed")
	}
	recvOutput(t, out, 10*time.Second)
}
