package agentproc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"cdr.dev/slog/v3"
	"github.com/coder/quartz"
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// Environment of a test binary re-run by the tests below. They are acted on
// in init, before any test, and only in the test binary itself, not in the
// helpers it starts (which would inherit them).
const (
	// seccompEnv ("ENOSYS" or "EPERM") makes the process deny pidfd_open
	// with that error, for itself and everything it starts.
	seccompEnv = "AGENTPROC_TEST_SECCOMP"
	// newProcEnv mounts a /proc of the process's own PID namespace, in a
	// mount namespace of its own.
	newProcEnv = "AGENTPROC_TEST_NEWPROC"
	// innerEnv marks the re-run binary, whose tests run instead of
	// skipping.
	innerEnv = "AGENTPROC_TEST_INNER"
)

func init() {
	if os.Getenv(agentproc.HelperEnv) != "" {
		return
	}
	if mode := os.Getenv(seccompEnv); mode != "" {
		if err := denyPidfdOpen(mode); err != nil {
			fmt.Fprintln(os.Stderr, "install seccomp filter:", err)
			os.Exit(3)
		}
	}
	if os.Getenv(newProcEnv) != "" {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			fmt.Fprintln(os.Stderr, "make mounts private:", err)
			os.Exit(3)
		}
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			fmt.Fprintln(os.Stderr, "mount /proc:", err)
			os.Exit(3)
		}
	}
}

// denyPidfdOpen installs a seccomp filter on every thread that makes
// pidfd_open fail with the named error, as old kernels (ENOSYS) and some
// container profiles (EPERM) do. Children inherit it.
func denyPidfdOpen(mode string) error {
	errno := map[string]unix.Errno{"ENOSYS": unix.ENOSYS, "EPERM": unix.EPERM}[mode]
	if errno == 0 {
		return fmt.Errorf("unknown mode %q", mode)
	}
	arch := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if arch == 0 {
		return fmt.Errorf("no audit arch for %s", runtime.GOARCH)
	}
	// struct seccomp_data: int nr at offset 0, u32 arch at offset 4.
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 3, K: arch},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_PIDFD_OPEN},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(errno)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	runtime.KeepAlive(filter)
	return nil
}

// rerun runs the tests matching pattern in a fresh copy of the test binary
// with env added, started with the given clone flags, and fails unless
// every one of want passed there. It skips when the kernel or our
// privileges refuse the clone flags or the filter.
func rerun(t *testing.T, cloneflags uintptr, pattern string, want []string, env ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run="+pattern, "-test.count=1", "-test.v", "-test.timeout=100s")
	cmd.Env = append(append(os.Environ(), innerEnv+"=1"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: cloneflags, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exit):
		t.Skipf("cannot start the test binary with clone flags %#x: %v", cloneflags, err)
	case err != nil && exit.ExitCode() == 3:
		t.Skipf("cannot set up the environment: %s", out)
	case err != nil:
		t.Fatalf("re-run %s: %v\n%s", pattern, err, out)
	}
	for _, name := range want {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("re-run: %s did not pass:\n%s", name, out)
		}
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: namespaces and /proc/sys/kernel/ns_last_pid")
	}
}

func requireInner(t *testing.T) {
	t.Helper()
	if os.Getenv(innerEnv) == "" {
		t.Skip("runs only inside the environment another test sets up")
	}
}

// TestEscapesWithoutPidfd runs the escape matrix where pidfd_open fails,
// with ENOSYS (kernels before 5.3) and with EPERM (a seccomp profile that
// denies it): every escapee must still be found and killed, by a kill(2)
// made right after its marker was read again.
func TestEscapesWithoutPidfd(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"ENOSYS", "EPERM"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			rerun(t, 0, "^(TestPidfdDenied|TestEscapesSwept)$", []string{"TestPidfdDenied", "TestEscapesSwept"}, seccompEnv+"="+mode)
		})
	}
}

// TestPidfdDenied checks, inside TestEscapesWithoutPidfd's re-run, that
// the filter is in force, so that the matrix there cannot pass by using
// pidfds after all.
func TestPidfdDenied(t *testing.T) {
	requireInner(t)
	mode := os.Getenv(seccompEnv)
	if mode == "" {
		t.Skip("no seccomp filter installed")
	}
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err == nil {
		unix.Close(fd)
	}
	if got := unix.ErrnoName(errnoOf(err)); got != mode {
		t.Fatalf("pidfd_open: got %v, want %s", err, mode)
	}
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	errors.As(err, &e)
	return e
}

// TestPIDReuseWithoutPidfd forces the PID of an escapee that exited on
// SIGTERM onto an unrelated process before the kill step, in a private PID
// namespace where /proc/sys/kernel/ns_last_pid picks the next PID, with
// pidfd_open denied. The unrelated process must survive: without a pidfd
// nothing is signalled from a list kept across the grace period.
func TestPIDReuseWithoutPidfd(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	rerun(t, syscall.CLONE_NEWPID|syscall.CLONE_NEWNS, "^TestPIDReuseInNamespace$", []string{"TestPIDReuseInNamespace"},
		seccompEnv+"=ENOSYS", newProcEnv+"=1")
}

func TestPIDReuseInNamespace(t *testing.T) {
	requireInner(t)
	if os.Getpid() != 1 {
		t.Fatalf("pid got %d, want 1 (a private PID namespace)", os.Getpid())
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk), agentproc.WithGracePeriod(5*time.Second))
	trap := clk.Trap().NewTimer("agentproc", "grace")
	defer trap.Close()
	// The escapee dies on SIGTERM and is reaped by the shell, which ignores
	// SIGTERM and says when its PID is free again.
	p := mustStart(t, m, agentproc.Request{Command: agentproc.HelperEnv + "=" + agentproc.UseHelper("term") + " setsid " + shellQuote(exe) +
		" & echo esc=$!; trap '' TERM; echo trapped; wait $!; echo reaped; exec sleep 1000"})
	esc, _ := strconv.Atoi(waitForOutput(t, p, regexp.MustCompile(`esc=(\d+)`))[1])
	// Both the escapee's handler and the shell's trap are in place.
	waitForOutput(t, p, regexp.MustCompile(`ready pid=`))
	waitForOutput(t, p, regexp.MustCompile(`trapped`))

	stopped := make(chan agentproc.Info, 1)
	go func() {
		info, _ := p.Stop(ctx)
		stopped <- info
	}()
	// The grace timer starts once terminate has been sent to the group
	// and to the escapee.
	trap.MustWait(ctx).MustRelease(ctx)
	waitForOutput(t, p, regexp.MustCompile(`reaped`))

	decoy := startWithPID(t, esc)
	clk.Advance(5 * time.Second).MustWait(ctx)
	select {
	case info := <-stopped:
		if info.Running {
			t.Fatalf("Stop: got %+v, want exited", info)
		}
	case <-ctx.Done():
		t.Fatal("Stop did not return after the grace period")
	}
	if !alive(decoy.Process.Pid) {
		t.Errorf("decoy with the escapee's old PID %d: got killed, want alive", esc)
	}
}

// startWithPID starts `sleep 1000` as PID pid, which must be free, by
// setting the namespace's last PID just below it, and kills it at the end.
// A thread the runtime starts meanwhile can take the PID first, so it
// tries a few times.
func startWithPID(t *testing.T, pid int) *exec.Cmd {
	t.Helper()
	for range 20 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sleep", "1000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		if cmd.Process.Pid == pid {
			return cmd
		}
	}
	t.Fatalf("could not start a process with PID %d", pid)
	return nil
}

// TestForeignProc runs a Manager in a private PID namespace whose /proc
// still shows the parent namespace (unshare --pid --fork without a
// remount). It must notice at New, warn once, and still kill the members
// of a group that outlived its shell: kill(-pgid, 0) says they exist even
// though /proc cannot count them.
func TestForeignProc(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	rerun(t, syscall.CLONE_NEWPID, "^TestForeignProcInNamespace$", []string{"TestForeignProcInNamespace"})
}

func TestForeignProcInNamespace(t *testing.T) {
	requireInner(t)
	if os.Getpid() != 1 {
		t.Fatalf("pid got %d, want 1 (a private PID namespace)", os.Getpid())
	}
	var w agentproc.WarnSink
	m := newManager(t, agentproc.WithLogger(slog.Make(&w)))
	if got := w.Messages(); len(got) != 1 || !strings.Contains(got[0], "another PID namespace") {
		t.Errorf("warnings at New: got %q, want one about /proc's PID namespace", got)
	}
	// Ports would read the sockets of the parent namespace's processes
	// that have our PIDs' numbers.
	inputs := mustStart(t, m, agentproc.Request{Command: "read x", Stdin: true})
	if _, err := inputs.Ports(testContext(t)); !errors.Is(err, agentproc.ErrUnsupported) {
		t.Errorf("Ports under a foreign /proc: got %v, want ErrUnsupported", err)
	}
	if _, err := inputs.WaitPort(testContext(t), 0); !errors.Is(err, agentproc.ErrUnsupported) {
		t.Errorf("WaitPort under a foreign /proc: got %v, want ErrUnsupported", err)
	}
	if err := inputs.CloseStdin(testContext(t)); err != nil {
		t.Fatal(err)
	}
	mustWait(t, inputs)

	p := mustStart(t, m, agentproc.Request{Command: "sleep 1000 & echo pid=$!"})
	info := mustWait(t, p)
	if info.Leftovers != 1 {
		t.Errorf("Leftovers got %d, want 1", info.Leftovers)
	}
	// The sleep was reparented to us, PID 1 here: it is gone once we can
	// reap it.
	reapChild(t, pidsIn(t, p.Output().Text)[0])
	if got := w.Messages(); len(got) != 1 {
		t.Errorf("warnings after a run: got %q, want only the one from New", got)
	}
}

// reapChild waits, under the test deadline, until pid, our child, has
// exited, and reaps it.
func reapChild(t *testing.T, pid int) {
	t.Helper()
	ctx := testContext(t)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if got == pid || err != nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("process %d: still running, want killed", pid)
		case <-tick.C:
		}
	}
}

// TestStopContinuesStoppedProcess stops a process that handles SIGTERM
// while it is itself stopped (SIGSTOP), in the group and as an escapee:
// the terminate step continues it, so it exits on SIGTERM long before the
// hour-long grace period.
func TestStopContinuesStoppedProcess(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, cmd string }{
		{"group", "exec " + shellQuote(exe)},
		// The shell ignores SIGTERM and ends once the escapee has.
		{"escapee", agentproc.HelperEnv + "=" + agentproc.UseHelper("term") + " setsid " + shellQuote(exe) + " & trap '' TERM; echo trapped; wait $!"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, agentproc.WithGracePeriod(time.Hour))
			p := mustStart(t, m, agentproc.Request{Command: tt.cmd, Env: map[string]string{agentproc.HelperEnv: agentproc.UseHelper("term")}})
			pid, _ := strconv.Atoi(waitForOutput(t, p, regexp.MustCompile(`ready pid=(\d+)`))[1])
			if tt.name == "escapee" {
				// The shell must ignore SIGTERM before Stop sends it.
				waitForOutput(t, p, regexp.MustCompile(`trapped`))
			}
			if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			waitStopped(t, pid)
			info, err := p.Stop(testContext(t))
			if err != nil {
				t.Fatalf("Stop: got %v, want the process to exit on SIGTERM within the grace", err)
			}
			if got := exitCode(info); got != 0 {
				t.Errorf("exit code got %d, want 0 (handled SIGTERM)", got)
			}
			if want := fmt.Sprintf("terminated pid=%d", pid); !strings.Contains(p.Output().Text, want) {
				t.Errorf("output got %q, want %q", p.Output().Text, want)
			}
		})
	}
}

// waitStopped waits until /proc says pid is stopped (state T).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	ctx := testContext(t)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		state, _ := agentproc.ProcState(pid)
		if state == 'T' {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("process %d: state got %q, want 'T' (stopped)", pid, state)
		case <-tick.C:
		}
	}
}
