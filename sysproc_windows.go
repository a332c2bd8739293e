package agentproc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
//
// newShellCmd leaves the command as the last of cmd.Args; prepare, which
// builds all of SysProcAttr, writes the command line from them
// (cmdExeLine).
func newShellCmd(ctx context.Context, shell []string, command string) *exec.Cmd {
	args := append(append([]string(nil), shell[1:]...), command)
	return exec.CommandContext(ctx, shell[0], args...)
}

// cmdExeLine is cmd.exe's command line for args (the shell, its own
// arguments, then the command): the shell's arguments quoted the Go way,
// the command wrapped in one pair of quotes and otherwise as typed.
func cmdExeLine(args []string) string {
	var b strings.Builder
	b.WriteString(windows.EscapeArg(args[0]))
	for _, a := range args[1 : len(args)-1] {
		b.WriteByte(' ')
		b.WriteString(windows.EscapeArg(a))
	}
	b.WriteString(` "`)
	b.WriteString(args[len(args)-1])
	b.WriteByte('"')
	return b.String()
}

// envKeyFold returns the form in which Windows compares environment names:
// case-insensitively.
func envKeyFold(k string) string { return strings.ToUpper(k) }

// envHasPWD: Windows programs do not read PWD (os/exec does not set it
// there either).
const envHasPWD = false

// isCmdExe reports whether name is cmd.exe, spelled in any case, with or
// without its directory and extension.
func isCmdExe(name string) bool {
	base := strings.ToLower(filepath.Base(name))
	return base == "cmd" || base == "cmd.exe"
}

// sysProc ties one started command to its process tree through a Job
// Object. Every process the shell starts is born into the job (which allows
// no breakaway), so the job's accounting is the tree's and TerminateJobObject
// ends all of it. The job is created with kill-on-close, so even if this
// process dies without cleaning up, closing its last handle ends the tree.
//
// The shell's process handle is kept open until release. An open handle
// keeps the process object, and with it the PID, from being reused; the
// PID is also the console process group ID that CTRL_BREAK_EVENT targets,
// so a break can never reach a new process group that happens to get the
// same number while leftovers are still being handled.
type sysProc struct {
	mu   sync.Mutex
	job  windows.Handle // 0 after release
	proc windows.Handle // the shell; 0 after release
	pid  uint32         // the shell's PID and process group ID; 0 after release

	// ownConsole: the child was started with a hidden console of its own
	// (the host has none), so breaks are sent from inside that console.
	ownConsole bool
	// batch: the command runs a batch file, whose cmd.exe answers Ctrl+Break
	// with a prompt (see onlyShellsLeft).
	batch bool
	// killedRunning: terminate ended the job while the shell was running.
	killedRunning bool
	// stopping: a stop ladder is under way, which kills after the grace
	// period anyway; only then does a break start the batch watcher.
	stopping bool
	// watchDone is closed when the batch-prompt watcher has returned; nil
	// when none was started. stopWatch tells it to return.
	watchDone chan struct{}
	stopWatch atomic.Bool
}

func newSysProc(*config) *sysProc { return &sysProc{} }

// ntResumeProcess resumes every thread of a process. os.StartProcess closes
// the handle of the initial thread, so ResumeThread cannot be used on a
// child started with CREATE_SUSPENDED.
var ntResumeProcess = windows.NewLazySystemDLL("ntdll.dll").NewProc("NtResumeProcess")

var (
	kernel32             = windows.NewLazySystemDLL("kernel32.dll")
	procIsProcessInJob   = kernel32.NewProc("IsProcessInJob")
	procGetConsoleWindow = kernel32.NewProc("GetConsoleWindow")
)

// prepare builds the child's attributes, the only code that sets
// cmd.SysProcAttr on Windows: the creation flags the Job Object needs and,
// for cmd.exe, the verbatim command line (see newShellCmd). Windows has no
// terminal or cgroup to start in: a is always the zero request.
func (s *sysProc) prepare(cmd *exec.Cmd, _ childAttrs) error {
	attr := &syscall.SysProcAttr{}
	if len(cmd.Args) > 1 && isCmdExe(cmd.Args[0]) {
		attr.CmdLine = cmdExeLine(cmd.Args)
	}
	consoleFl, own := consoleFlags(hostHasConsole())
	jobFl, err := hostJobPlan()
	if err != nil {
		return err
	}
	// Suspended, so that the shell cannot start a child before it is in
	// the job (a child started earlier would be outside it, untracked and
	// unkillable). A new process group, so that CTRL_BREAK_EVENT can
	// target the tree and not this process.
	attr.CreationFlags = windows.CREATE_SUSPENDED | windows.CREATE_NEW_PROCESS_GROUP | consoleFl | jobFl
	cmd.SysProcAttr = attr
	s.ownConsole = own
	if len(cmd.Args) > 1 && isCmdExe(cmd.Args[0]) {
		// The command is cmd.exe's last argument (newShellCmd). Resolving
		// its programs reads directories: this runs in Start, under no lock.
		s.batch = runsBatchFile(cmd.Args[len(cmd.Args)-1], cmdResolver(cmd.Env, cmd.Dir))
	}

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

// hostHasConsole reports whether this process is attached to a console
// (visible or not). GetConsoleWindow is not enough: a console created with
// CREATE_NO_WINDOW has no window but is a console all the same, so
// GetConsoleCP, which fails without a console, decides.
//
// consoleMu keeps the answer from being read while sendBreakLocked has
// this process attached to a child's console for a moment. After that the
// answer may be acted on without the lock: a child started with
// CREATE_NO_WINDOW gets a console of its own whatever this process is
// attached to when it is created.
func hostHasConsole() bool {
	consoleMu.Lock()
	defer consoleMu.Unlock()
	if w, _, _ := procGetConsoleWindow.Call(); w != 0 {
		return true
	}
	cp, err := windows.GetConsoleCP()
	return err == nil && cp != 0
}

// hostJobPlan returns the creation flags a child needs when this process
// runs inside a job (see nestedJobPlan). When the host's job cannot be read
// it returns no flags: AssignProcessToJobObject then reports the problem.
func hostJobPlan() (uint32, error) {
	var inJob int32
	if r, _, _ := procIsProcessInJob.Call(uintptr(windows.CurrentProcess()), 0, uintptr(unsafe.Pointer(&inJob))); r == 0 || inJob == 0 {
		return 0, nil
	}
	// A zero job handle queries the job of the calling process.
	var ui windows.JOBOBJECT_BASIC_UI_RESTRICTIONS
	if err := windows.QueryInformationJobObject(0, windows.JobObjectBasicUIRestrictions,
		uintptr(unsafe.Pointer(&ui)), uint32(unsafe.Sizeof(ui)), nil); err != nil {
		return 0, nil
	}
	var ext windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if err := windows.QueryInformationJobObject(0, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&ext)), uint32(unsafe.Sizeof(ext)), nil); err != nil {
		return 0, nil
	}
	flags := ext.BasicLimitInformation.LimitFlags
	return nestedJobPlan(true, ui.UIRestrictionsClass != 0,
		flags&windows.JOB_OBJECT_LIMIT_BREAKAWAY_OK != 0,
		flags&windows.JOB_OBJECT_LIMIT_SILENT_BREAKAWAY_OK != 0)
}

// assignError explains a failed AssignProcessToJobObject: access denied for
// a host inside a job is the nesting limit of nestedJobPlan (on Windows 7,
// which has no nested jobs, any host job causes it).
func assignError(pid uint32, err error) error {
	var inJob int32
	if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		if r, _, _ := procIsProcessInJob.Call(uintptr(windows.CurrentProcess()), 0, uintptr(unsafe.Pointer(&inJob))); r != 0 && inJob != 0 {
			return xerrors.Errorf("assign process %d to job: %v: %w", pid, err, errNestedJob)
		}
	}
	return xerrors.Errorf("assign process %d to job: %w", pid, err)
}

// cmdResolver returns the function runsBatchFile uses to find what cmd.exe
// would run for a bare name: the working directory first, then PATH, each
// with the extensions of PATHEXT in order, both read from the child's
// environment.
func cmdResolver(env []string, dir string) func(string) string {
	path, pathext := "", ".COM;.EXE;.BAT;.CMD"
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "PATH":
			path = v
		case "PATHEXT":
			pathext = v
		}
	}
	return func(name string) string {
		if strings.ContainsAny(name, `\/:%`) {
			return ""
		}
		dirs := append([]string{dir}, filepath.SplitList(path)...)
		for _, d := range dirs {
			if d == "" {
				continue
			}
			for _, ext := range strings.Split(pathext, ";") {
				if ext == "" {
					continue
				}
				p := filepath.Join(d, name+ext)
				if st, err := os.Stat(p); err == nil && !st.IsDir() {
					return p
				}
			}
		}
		return ""
	}
}

func (s *sysProc) started(cmd *exec.Cmd) error {
	pid := uint32(cmd.Process.Pid)
	// The child is suspended and cannot exit, so its PID cannot have been
	// reused yet: this opens the process we started. The handle stays open
	// until release (see sysProc).
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|
		windows.PROCESS_SUSPEND_RESUME|windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.SYNCHRONIZE, false, pid)
	if err != nil {
		_ = cmd.Process.Kill()
		return xerrors.Errorf("open process %d: %w", pid, err)
	}
	if err := windows.AssignProcessToJobObject(s.job, h); err != nil {
		_ = cmd.Process.Kill()
		_ = windows.CloseHandle(h)
		return assignError(pid, err)
	}
	s.mu.Lock()
	s.pid = pid
	s.proc = h
	s.mu.Unlock()
	if status, _, _ := ntResumeProcess.Call(uintptr(h)); status != 0 {
		_ = s.terminate()
		return xerrors.Errorf("resume process %d: %w", pid, windows.NTStatus(status))
	}
	return nil
}

// terminate kills every member of the job with winJobKillExitCode, and
// notes whether the shell was still running, so that exitStatus can tell a
// kill by this package from an exit with the same code.
func (s *sysProc) terminate() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.terminateLocked()
}

func (s *sysProc) terminateLocked() error {
	if s.job == 0 {
		return nil
	}
	running := false
	if s.proc != 0 {
		ev, err := windows.WaitForSingleObject(s.proc, 0)
		running = err == nil && ev == uint32(windows.WAIT_TIMEOUT)
	}
	if err := windows.TerminateJobObject(s.job, winJobKillExitCode); err != nil {
		return xerrors.Errorf("terminate job: %w", err)
	}
	if running {
		s.killedRunning = true
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

// maxListedMembers bounds the job members memberPIDs reports; the callers
// need only a few (one to attach to, or whether any non-shell is left).
const maxListedMembers = 64

// memberPIDs lists the PIDs of the job's live members, at most
// maxListedMembers of them.
func (s *sysProc) memberPIDs() ([]uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.memberPIDsLocked()
}

func (s *sysProc) memberPIDsLocked() ([]uint32, error) {
	if s.job == 0 {
		return nil, errJobReleased
	}
	// JOBOBJECT_BASIC_PROCESS_ID_LIST: two counts, then ULONG_PTR IDs.
	var list struct {
		Assigned uint32
		Listed   uint32
		IDs      [maxListedMembers]uintptr
	}
	err := windows.QueryInformationJobObject(s.job, windows.JobObjectBasicProcessIdList,
		uintptr(unsafe.Pointer(&list)), uint32(unsafe.Sizeof(list)), nil)
	if err != nil && !errors.Is(err, windows.ERROR_MORE_DATA) {
		return nil, err
	}
	n := min(int(list.Listed), maxListedMembers)
	pids := make([]uint32, 0, n)
	for _, id := range list.IDs[:n] {
		pids = append(pids, uint32(id))
	}
	return pids, nil
}

// memberImages returns the executable base names of the job's live
// members; a member that exits meanwhile is left out.
func (s *sysProc) memberImages() ([]string, error) {
	pids, err := s.memberPIDs()
	if err != nil {
		return nil, err
	}
	var images []string
	for _, pid := range pids {
		h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
		if err != nil {
			continue
		}
		// MAX_PATH fits almost every image; a longer path is asked again
		// with room for the longest.
		buf := make([]uint16, windows.MAX_PATH)
		n := uint32(len(buf))
		err = windows.QueryFullProcessImageName(h, 0, &buf[0], &n)
		if errors.Is(err, windows.ERROR_INSUFFICIENT_BUFFER) {
			buf = make([]uint16, windows.MAX_LONG_PATH)
			n = uint32(len(buf))
			err = windows.QueryFullProcessImageName(h, 0, &buf[0], &n)
		}
		_ = windows.CloseHandle(h)
		name := "" // alive but not readable: unknown, counted as a program
		if err == nil {
			name = filepath.Base(windows.UTF16ToString(buf[:n]))
		}
		images = append(images, name)
	}
	return images, nil
}

// liveMembers counts the job's live members that belong to the command:
// all of them, less the console host when the child has a console of its
// own (see countPrograms). active is the job's own count.
func (s *sysProc) liveMembers() (n, active int, err error) {
	acct, err := s.accounting()
	if err != nil {
		return 0, 0, err
	}
	active = int(acct.ActiveProcesses)
	if active == 0 || !s.ownConsole {
		return active, active, nil
	}
	images, err := s.memberImages()
	if err != nil {
		return active, active, nil
	}
	return countPrograms(images), active, nil
}

func (s *sysProc) killLeftovers() int {
	// The shell has exited and been waited for. Its PID, the console
	// process group ID, stays pinned by s.proc until release, so a break
	// sent meanwhile can reach only what is left of this tree.
	n, active, err := s.liveMembers()
	if err != nil {
		// Nothing to count; kill anyway so the pipe can reach EOF.
		_ = s.terminate()
		return 0
	}
	if active > 0 {
		// A lingering console host is killed too, uncounted.
		_ = s.terminate()
	}
	return n
}

func (s *sysProc) alive() bool {
	n, _, err := s.liveMembers()
	if errors.Is(err, errJobReleased) {
		return false // released after the exit: nothing left to signal
	}
	if err != nil {
		// Unknown counts as alive: the stop ladder then kills, which is
		// harmless on an empty job.
		return true
	}
	return n > 0
}

// treePeak is the job's peak commit as usage gave it: the job holds the
// whole tree, and nothing of the host's.
func (*sysProc) treePeak(_ int, rss int64) int64 { return rss }

// usage reports the tree's CPU time and the peak commit charge of its
// largest process. Windows keeps no per-tree peak of resident memory; the
// job records, per process, the peak of committed private memory (what the
// process allocated, resident or paged out), which is what Info.MaxRSS
// holds here. It is neither Unix's ru_maxrss nor a working set.
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

// release closes the job and the shell's handle, which frees its PID (and
// process group ID) for reuse: from here on nothing is signalled. A batch
// prompt watcher is stopped first; it uses both handles.
func (s *sysProc) release() {
	s.mu.Lock()
	done := s.watchDone
	s.mu.Unlock()
	if done != nil {
		s.stopWatch.Store(true)
		<-done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.job != 0 {
		_ = windows.CloseHandle(s.job)
		s.job = 0
	}
	if s.proc != 0 {
		_ = windows.CloseHandle(s.proc)
		s.proc = 0
	}
	s.pid = 0
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
