package agentproc

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

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
			_ = s.signal(SignalKill, nil)
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
	if code, sig := s.exitStatus(cmd.ProcessState); code != 42 || sig != "" {
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
	if err := s.signal(SignalKill, nil); err != nil {
		t.Fatalf("signal kill: %v", err)
	}
	waitCmd(t, cmd, 10*time.Second)
	if !waitGone(child, 10*time.Second) {
		t.Fatalf("helper still running 10s after kill")
	}
	recvOutput(t, out, 10*time.Second)
	if err := s.signal(SignalKill, nil); err != errNoProcess {
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
	if err := s.signal(SignalTerminate, nil); err != nil {
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

func TestSysProcPIDPinnedUntilRelease(t *testing.T) {
	t.Parallel()
	cmd, s, out := startSys(t, defaultShell(), `exit /b 42`)
	waitCmd(t, cmd, 10*time.Second)
	recvOutput(t, out, 10*time.Second)
	pid := uint32(cmd.Process.Pid)
	// os/exec has closed its handle to the shell. Ours keeps the process
	// object, so the PID (the group ID breaks target) still names the
	// exited shell, not a new process. (Wine keeps an exited process
	// openable anyway, so there only the checks of s.pid and s.proc below
	// can fail: they catch a release that forgets the PID in leftovers.)
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err != nil {
		t.Fatalf("open exited shell %d before release: got %v, want the pinned process", pid, err)
	}
	var code uint32
	err = windows.GetExitCodeProcess(h, &code)
	_ = windows.CloseHandle(h)
	if err != nil || code != 42 {
		t.Errorf("exit code of PID %d before release: got %d, %v, want 42 (the shell)", pid, code, err)
	}
	if n := s.killLeftovers(); n != 0 {
		t.Errorf("leftovers: got %d, want 0", n)
	}
	s.mu.Lock()
	pinned := s.pid == pid && s.proc != 0
	s.mu.Unlock()
	if !pinned {
		t.Errorf("after leftovers: pid, handle got unset, want the shell's kept until release")
	}
	s.release()
	if s.pid != 0 || s.proc != 0 {
		t.Errorf("after release: pid %d, handle %v, want 0, 0", s.pid, s.proc)
	}
	if err := s.signal(SignalTerminate, nil); err != errNoProcess {
		t.Errorf("signal after release: got %v, want errNoProcess", err)
	}
}

func TestSysProcKillIsNamed(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep := NewPIDReporter(t)
	cmd, s, out := startSys(t, defaultShell(), `"`+exe+`"`, helperEnv+"="+useHelper("sleep"), rep.Env())
	rep.Next(time.Now().Add(20 * time.Second))
	if err := s.signal(SignalKill, nil); err != nil {
		t.Fatalf("signal kill: %v", err)
	}
	waitCmd(t, cmd, 10*time.Second)
	recvOutput(t, out, 10*time.Second)
	if code, sig := s.exitStatus(cmd.ProcessState); code != winJobKillExitCode || sig != winSignalJobKill {
		t.Errorf("exitStatus after kill: got (%d, %q), want (%d, %q)", code, sig, winJobKillExitCode, winSignalJobKill)
	}
	// A job kill after the shell exited (the leftovers path) does not
	// make the shell's own exit a kill.
	cmd2, s2, out2 := startSys(t, defaultShell(), `exit /b 1`)
	waitCmd(t, cmd2, 10*time.Second)
	recvOutput(t, out2, 10*time.Second)
	_ = s2.terminate()
	if code, sig := s2.exitStatus(cmd2.ProcessState); code != 1 || sig != "" {
		t.Errorf("exitStatus of exit /b 1: got (%d, %q), want (1, \"\")", code, sig)
	}
}

func TestSysProcBatchPromptWatcher(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep := NewPIDReporter(t)
	// After the helper, cmd.exe stays busy with a builtin that never ends,
	// as it would on the "Terminate batch job (Y/N)?" prompt: nothing but
	// cmd.exe is left in the job.
	cmd, s, out := startSys(t, defaultShell(), `"`+exe+`" & for /l %i in (0,0,1) do @rem`, helperEnv+"="+useHelper("sleep"), rep.Env())
	helper := rep.NextReport(time.Now().Add(20 * time.Second))
	s.mu.Lock()
	s.stopping = true // as Stop would
	s.watchBatchPromptLocked()
	s.mu.Unlock()
	// The helper reported, so it runs in the job next to cmd.exe.
	if images, err := s.memberImages(); err != nil || len(images) < 2 {
		t.Fatalf("job members: got %q, %v, want cmd.exe and the helper", images, err)
	}
	// While the helper runs the watcher must leave the tree alone: the
	// shell must not exit during ten of the watcher's polls.
	if ev, _ := windows.WaitForSingleObject(s.proc, uint32(10*batchPoll/time.Millisecond)); ev != uint32(windows.WAIT_TIMEOUT) {
		t.Fatalf("shell exited while the helper ran: the watcher killed a tree with a program in it")
	}
	hk, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, helper.PID)
	if err != nil {
		t.Fatalf("open helper: %v", err)
	}
	_ = windows.TerminateProcess(hk, 0)
	_ = windows.CloseHandle(hk)
	waitCmd(t, cmd, 10*time.Second)
	recvOutput(t, out, 10*time.Second)
	if code, sig := s.exitStatus(cmd.ProcessState); sig != winSignalJobKill {
		t.Errorf("exitStatus: got (%d, %q), want the watcher's job kill %q", code, sig, winSignalJobKill)
	}
}

// TestNestedJob runs a Manager inside a job set up as a host's might be:
// without UI limits the command's job nests; with UI limits it can only
// break away where the job allows it, and otherwise Start must fail with
// ErrUnsupported naming the cause, before anything runs.
func TestNestedJob(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		uiLimits  bool
		breakaway bool
		wantCode  int
		wantText  string
	}{
		{"no UI limits", false, false, 0, "nested"},
		{"UI limits, breakaway allowed", true, true, 0, "nested"},
		{"UI limits, no breakaway", true, false, 4, "UI restrictions"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.wantCode != 0 && underWine() {
				// Under Wine the nested job is made and the command
				// runs: there is nothing to refuse.
				t.Skip("Wine 8.0 does not refuse nesting under a job with UI restrictions")
			}
			job, err := windows.CreateJobObject(nil, nil)
			if err != nil {
				t.Fatalf("create job: %v", err)
			}
			defer windows.CloseHandle(job)
			var limits windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
			limits.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
			if tt.breakaway {
				limits.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_BREAKAWAY_OK
			}
			if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
				uintptr(unsafe.Pointer(&limits)), uint32(unsafe.Sizeof(limits))); err != nil {
				t.Fatalf("set job limits: %v", err)
			}
			if tt.uiLimits {
				ui := windows.JOBOBJECT_BASIC_UI_RESTRICTIONS{UIRestrictionsClass: windows.JOB_OBJECT_UILIMIT_DESKTOP}
				if _, err := windows.SetInformationJobObject(job, windows.JobObjectBasicUIRestrictions,
					uintptr(unsafe.Pointer(&ui)), uint32(unsafe.Sizeof(ui))); err != nil {
					t.Fatalf("set UI limits: %v", err)
				}
			}
			host := exec.Command(exe)
			host.Env = append(os.Environ(), helperEnv+"="+useHelper("nestedjob"))
			var out strings.Builder
			host.Stdout, host.Stderr = &out, &out
			host.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_SUSPENDED}
			if err := host.Start(); err != nil {
				t.Fatalf("start host: %v", err)
			}
			h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.PROCESS_SUSPEND_RESUME, false, uint32(host.Process.Pid))
			if err != nil {
				_ = host.Process.Kill()
				_ = host.Wait()
				t.Fatalf("open host: %v", err)
			}
			defer windows.CloseHandle(h)
			if err := windows.AssignProcessToJobObject(job, h); err != nil {
				_ = host.Process.Kill()
				_ = host.Wait()
				t.Fatalf("assign host to job: %v", err)
			}
			_, _, _ = ntResumeProcess.Call(uintptr(h))
			waitCmd(t, host, 20*time.Second)
			if code := host.ProcessState.ExitCode(); code != tt.wantCode || !strings.Contains(out.String(), tt.wantText) {
				t.Errorf("host exit %d, output %q, want %d and %q", code, out.String(), tt.wantCode, tt.wantText)
			}
		})
	}
}

// TestSysProcConsole checks what a child gets for a console: a console in
// every case (console programs need one), and, when this host has none
// (under Wine the test binary has none), a console whose window is not
// shown: a service or GUI host must never open a window per command.
func TestSysProcConsole(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, s, out := startSys(t, defaultShell(), `"`+exe+`"`, helperEnv+"="+useHelper("console"))
	waitCmd(t, cmd, 10*time.Second)
	got := strings.TrimSpace(recvOutput(t, out, 10*time.Second))
	if s.ownConsole == hostHasConsole() {
		t.Errorf("ownConsole got %v with hostHasConsole %v, want the opposite", s.ownConsole, hostHasConsole())
	}
	if !strings.Contains(got, "console=true") {
		t.Errorf("child: got %q, want it to have a console", got)
	}
	if s.ownConsole && !strings.Contains(got, "visible=false") {
		t.Errorf("child of a host without a console: got %q, want no visible window", got)
	}
}
