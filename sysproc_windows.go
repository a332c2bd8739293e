package agentproc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/xerrors"
)

// defaultShell is cmd.exe with AutoRun disabled (/d) and the simple quote
// rule (/s), so that newShellCmd can pass the command through verbatim.
func defaultShell() []string { return []string{"cmd.exe", "/d", "/s", "/c"} }

// newShellCmd builds the command that runs command under shell.
//
// cmd.exe does not parse its command line with the rules Go's argument
// quoting assumes (those of CommandLineToArgvW): it takes everything after /c
// as one string. Quoting the command the Go way would turn `echo "a & b"`
// into `"echo \"a & b\""`, which cmd.exe runs as something else. So for
// cmd.exe the command line is written by hand: the shell's own arguments,
// then the command wrapped in one pair of quotes. With /s cmd.exe removes
// exactly the first and the last quote and keeps the rest as typed; without
// /s it does the same except for a lone quoted executable name, where keeping
// the quotes means the same thing.
func newShellCmd(ctx context.Context, shell []string, command string) *exec.Cmd {
	args := append(append([]string(nil), shell[1:]...), command)
	cmd := exec.CommandContext(ctx, shell[0], args...)
	if isCmdExe(shell[0]) {
		var b strings.Builder
		b.WriteString(windows.EscapeArg(shell[0]))
		for _, a := range shell[1:] {
			b.WriteByte(' ')
			b.WriteString(windows.EscapeArg(a))
		}
		b.WriteString(` "`)
		b.WriteString(command)
		b.WriteByte('"')
		cmd.SysProcAttr = &syscall.SysProcAttr{CmdLine: b.String()}
	}
	return cmd
}

// envKeyFold returns the form in which Windows compares environment names:
// case-insensitively.
func envKeyFold(k string) string { return strings.ToUpper(k) }

// isCmdExe reports whether name is cmd.exe, spelled in any case, with or
// without its directory and extension.
func isCmdExe(name string) bool {
	base := strings.ToLower(filepath.Base(name))
	return base == "cmd" || base == "cmd.exe"
}

// sysProc ties one started command to its process tree through a Job
// Object. Every process the shell starts is born into the job (there is no
// breakaway), so the job's accounting is the tree's and TerminateJobObject
// ends all of it. The job is created with kill-on-close, so even if this
// process dies without cleaning up, closing its last handle ends the tree.
type sysProc struct {
	mu  sync.Mutex
	job windows.Handle // 0 after release
	pid uint32         // the shell's PID, which is also its process group ID
}

func newSysProc(*config) *sysProc { return &sysProc{} }

// resume does nothing: Windows has no stopped state a console signal must
// first end.
func (s *sysProc) resume() {}

// ntResumeProcess resumes every thread of a process. os.StartProcess closes
// the handle of the initial thread, so ResumeThread cannot be used on a
// child started with CREATE_SUSPENDED.
var ntResumeProcess = windows.NewLazySystemDLL("ntdll.dll").NewProc("NtResumeProcess")

func (s *sysProc) prepare(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Suspended, so that the shell cannot start a child before it is in
	// the job (a child started earlier would be outside it, untracked and
	// unkillable). A new process group, so that CTRL_BREAK_EVENT can
	// target the tree and not this process.
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_SUSPENDED | windows.CREATE_NEW_PROCESS_GROUP

	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return xerrors.Errorf("create job object: %w", err)
	}
	var limits windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	limits.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE |
		// A crashing member exits instead of waiting on an error dialog
		// that no one will see.
		windows.JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&limits)), uint32(unsafe.Sizeof(limits))); err != nil {
		_ = windows.CloseHandle(job)
		return xerrors.Errorf("set job object limits: %w", err)
	}
	s.job = job
	return nil
}

func (s *sysProc) started(cmd *exec.Cmd) error {
	pid := uint32(cmd.Process.Pid)
	// The child is suspended and cannot exit, so its PID cannot have been
	// reused yet: this opens the process we started.
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|
		windows.PROCESS_SUSPEND_RESUME|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err != nil {
		_ = cmd.Process.Kill()
		return xerrors.Errorf("open process %d: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(s.job, h); err != nil {
		_ = cmd.Process.Kill()
		return xerrors.Errorf("assign process %d to job: %w", pid, err)
	}
	s.mu.Lock()
	s.pid = pid
	s.mu.Unlock()
	if status, _, _ := ntResumeProcess.Call(uintptr(h)); status != 0 {
		_ = s.terminate()
		return xerrors.Errorf("resume process %d: %w", pid, windows.NTStatus(status))
	}
	return nil
}

// terminate kills every member of the job. Exit code 1, as a plain
// failure: the portable code knows when it was the one that killed.
func (s *sysProc) terminate() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.job == 0 {
		return nil
	}
	if err := windows.TerminateJobObject(s.job, 1); err != nil {
		return xerrors.Errorf("terminate job: %w", err)
	}
	return nil
}

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, which
// golang.org/x/sys/windows does not define. Times are in 100 ns units.
type jobAccounting struct {
	TotalUserTime             int64
	TotalKernelTime           int64
	ThisPeriodTotalUserTime   int64
	ThisPeriodTotalKernelTime int64
	TotalPageFaultCount       uint32
	TotalProcesses            uint32
	ActiveProcesses           uint32
	TotalTerminatedProcesses  uint32
}

func (s *sysProc) accounting() (jobAccounting, error) {
	var acct jobAccounting
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.job == 0 {
		return acct, errJobReleased
	}
	err := windows.QueryInformationJobObject(s.job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil)
	return acct, err
}

// errJobReleased is what accounting returns once release closed the job.
var errJobReleased = xerrors.New("agentproc: job released")

func (s *sysProc) leftovers() int {
	// The shell has exited and been waited for, so its PID, which names the
	// console process group, may be handed out again: from now on no
	// CTRL_BREAK_EVENT is sent to it.
	s.mu.Lock()
	s.pid = 0
	s.mu.Unlock()
	acct, err := s.accounting()
	if err != nil {
		// Nothing to count; kill anyway so the pipe can reach EOF.
		_ = s.terminate()
		return 0
	}
	if acct.ActiveProcesses == 0 {
		return 0
	}
	_ = s.terminate()
	return int(acct.ActiveProcesses)
}

func (s *sysProc) alive() bool {
	acct, err := s.accounting()
	if errors.Is(err, errJobReleased) {
		return false // released after the exit: nothing left to signal
	}
	if err != nil {
		// Unknown counts as alive: the stop ladder then kills, which is
		// harmless on an empty job.
		return true
	}
	return acct.ActiveProcesses > 0
}

// usage reports the tree's CPU time and the peak commit charge of its
// largest process (Windows has no per-tree resident-set peak; commit is the
// memory the process could not give back, the closest match to Unix's
// ru_maxrss, which is also per process).
func (s *sysProc) usage(state *os.ProcessState) (cpu time.Duration, maxRSS int64) {
	leaderCPU := state.UserTime() + state.SystemTime()
	acct, err := s.accounting()
	if err != nil {
		return leaderCPU, 0
	}
	cpu = time.Duration(acct.TotalUserTime+acct.TotalKernelTime) * 100
	// The job counts the leader, so its total is never smaller on Windows;
	// max keeps the leader's time where job accounting is not implemented
	// (Wine reports zero).
	cpu = max(cpu, leaderCPU)

	var limits windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	s.mu.Lock()
	err = windows.QueryInformationJobObject(s.job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&limits)), uint32(unsafe.Sizeof(limits)), nil)
	s.mu.Unlock()
	if err == nil {
		maxRSS = int64(limits.PeakProcessMemoryUsed)
	}
	return cpu, maxRSS
}

func (s *sysProc) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.job != 0 {
		_ = windows.CloseHandle(s.job)
		s.job = 0
	}
}

// checkShellCommand rejects commands the shell would silently run only in
// part: cmd.exe /c stops reading its command at the first line break, so
// the lines after it would never run. Trailing white space is harmless.
func checkShellCommand(shell []string, command string) error {
	if isCmdExe(shell[0]) && strings.ContainsAny(strings.TrimSpace(command), "\r\n") {
		return xerrors.Errorf("cmd.exe runs only the first line of a multi-line command; join the lines with & or && (or choose another shell with WithShell): %w", ErrInvalidRequest)
	}
	return nil
}
