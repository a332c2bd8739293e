package agentproc_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// markedProcs lists the live processes whose environment holds exactly
// MarkerEnv=id, with their command names. It reads all of /proc through the
// package's reader, skipping nothing, rather than asking the sweep.
func markedProcs(id string) map[int]string { return agentproc.ProcsMarked(id) }

// waitMarked waits until at least n processes named comm, other than the
// leader, carry the marker. The state waited for is in /proc only: the
// escapees are plain sleeps that cannot announce themselves, and the kernel
// has no event for "a process appeared", so /proc is polled (under the test
// deadline; load only makes it take more looks).
func waitMarked(t *testing.T, id, comm string, n, leader int) {
	t.Helper()
	ctx := testContext(t)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		got := 0
		for pid, c := range markedProcs(id) {
			if c == comm && pid != leader {
				got++
			}
		}
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("marked %q processes: got %d, want %d (%v)", comm, got, n, markedProcs(id))
		case <-tick.C:
		}
	}
}

// requireNoMarked waits (under the test deadline) until no live process
// carries the marker of id. The kill sweep waits for what it killed, so
// this normally passes at the first look.
func requireNoMarked(t *testing.T, id string) {
	t.Helper()
	ctx := testContext(t)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		left := markedProcs(id)
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("processes carrying the marker: got %v, want none", left)
		case <-tick.C:
		}
	}
}

// escape is one way for a command to leave processes behind.
type escape struct {
	name    string
	cmd     string
	sleeps  int  // marked sleep processes the command leaves
	outside int  // how many of those leave the process group
	prints  bool // cmd prints pid=N for processes without the marker
}

var escapes = []escape{
	{name: "background", cmd: "sleep 1000 &", sleeps: 1},
	{name: "setsid", cmd: "setsid sleep 1000 &", sleeps: 1, outside: 1},
	{name: "nohup", cmd: "nohup sleep 1000 &", sleeps: 1},
	// dash cannot enable job control without a terminal; bash can, and
	// then gives each job a process group of its own.
	{name: "nohup under job control", cmd: "bash -c 'set -m; nohup sleep 1000 &'", sleeps: 1, outside: 1},
	{name: "double fork", cmd: "sh -c '(sleep 1000 &) &'", sleeps: 1},
	{name: "setsid shell", cmd: "setsid sh -c 'sleep 1000 & wait' &", sleeps: 1, outside: 1},
	{name: "setsid ignoring TERM", cmd: `setsid sh -c 'trap "" TERM; sleep 1000 & wait' &`, sleeps: 1, outside: 1},
	{name: "setsid pipeline", cmd: "setsid sh -c 'sleep 1000 | sleep 1000' &", sleeps: 2, outside: 2},
	{name: "50 escaped", cmd: "i=0; while [ $i -lt 50 ]; do setsid sleep 1000 & i=$((i+1)); done", sleeps: 50, outside: 50},
}

// cgroupEscapes are caught only with a cgroup: the marker is gone.
var cgroupEscapes = []escape{
	{name: "env -i setsid", cmd: "env -i setsid sleep 1000 & echo pid=$!", prints: true},
}

// stopPath ends a running tree. suffix follows the escape in the command:
// the shell prints "ready" and execs a leader that runs until it is stopped
// or, to exercise the cleanup after the shell exits, killed by the test
// behind the library's back. The timeout path runs under a mock clock
// (clk is nil for the others) with Request.Timeout set to timeoutAfter.
type stopPath struct {
	name    string
	suffix  string
	timeout bool
	stop    func(t *testing.T, m *agentproc.Manager, p *agentproc.Process, clk *quartz.Mock) agentproc.Info
}

// timeoutAfter is the Request.Timeout of the timeout stop path; the mock
// clock only reaches it when the test advances it.
const timeoutAfter = time.Hour

// escapeDrain is the pipe drain of the escape matrix: longer than the test
// deadline, so that a stop path that waits out the drain instead of killing
// the escaped processes that hold the pipe cannot return in time. The
// sweep is then checked by an event (the stop returned: the pipe reached
// EOF) rather than by how long it took, which load would change.
const escapeDrain = 3 * testTimeout

var stopPaths = []stopPath{
	{"stop", "\necho ready; exec sleep 1000", false, func(t *testing.T, _ *agentproc.Manager, p *agentproc.Process, _ *quartz.Mock) agentproc.Info {
		info, err := p.Stop(testContext(t))
		if err != nil || info.Reason != agentproc.ReasonKilled {
			t.Errorf("Stop: got (%q, %v), want killed", info.Reason, err)
		}
		return info
	}},
	{"close", "\necho ready; exec sleep 1000", false, func(t *testing.T, m *agentproc.Manager, p *agentproc.Process, _ *quartz.Mock) agentproc.Info {
		// Close has no ctx; a Close that waited out the pipe drain (see
		// escapeDrain) must fail on the test deadline too.
		closed := make(chan error, 1)
		go func() { closed <- m.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-testContext(t).Done():
			t.Fatal("Close did not return: it is waiting out the pipe drain instead of sweeping")
		}
		info := p.Info()
		if info.Running || info.Reason != agentproc.ReasonShutdown {
			t.Errorf("after Close: got %+v, want exited with reason shutdown", info)
		}
		return info
	}},
	{"shell exits", "\necho ready; exec sleep 1000", false, func(t *testing.T, _ *agentproc.Manager, p *agentproc.Process, _ *quartz.Mock) agentproc.Info {
		// The leader exits by itself as far as the library knows.
		if err := unix.Kill(p.Info().PID, unix.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return mustWait(t, p)
	}},
	{"timeout", "\necho ready; exec sleep 1000", true, func(t *testing.T, _ *agentproc.Manager, p *agentproc.Process, clk *quartz.Mock) agentproc.Info {
		ctx := testContext(t)
		trap := clk.Trap().NewTimer("agentproc", "grace")
		defer trap.Close()
		// The timeout's timer exists since Start returned, so advancing
		// fires it; the ladder then starts its grace timer on the mock.
		clk.Advance(timeoutAfter).MustWait(ctx)
		trap.MustWait(ctx).MustRelease(ctx)
		select {
		case <-p.Done():
		default:
			// Something ignored SIGTERM: let the grace period pass.
			clk.Advance(5 * time.Second).MustWait(ctx)
		}
		info := mustWait(t, p)
		if info.Reason != agentproc.ReasonTimeout {
			t.Errorf("reason got %q, want %q", info.Reason, agentproc.ReasonTimeout)
		}
		return info
	}},
}

// runEscapeMatrix runs every escape through every stop path and checks that
// nothing of the tree survives.
func runEscapeMatrix(t *testing.T, cases []escape, opts ...agentproc.Option) {
	for _, path := range stopPaths {
		for _, tt := range cases {
			t.Run(path.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				mopts := append([]agentproc.Option{agentproc.WithGracePeriod(5 * time.Second), agentproc.WithPipeDrain(escapeDrain)}, opts...)
				req := agentproc.Request{Command: tt.cmd + path.suffix}
				var clk *quartz.Mock
				if path.timeout {
					clk = quartz.NewMock(t)
					mopts = append(mopts, agentproc.WithClock(clk))
					req.Timeout = timeoutAfter
				}
				m := newManager(t, mopts...)
				p := mustStart(t, m, req)
				waitForOutput(t, p, regexp.MustCompile(`ready`))
				var pids []int
				if tt.prints {
					pids = pidsIn(t, p.Output().Text)
					waitComm(t, pids, "sleep")
				}
				waitMarked(t, p.ID(), "sleep", tt.sleeps, p.Info().PID)
				// Each stop path fails on the test deadline unless the
				// pipe reaches EOF, i.e. unless the escapees holding it
				// were killed (the drain is escapeDrain).
				info := path.stop(t, m, p, clk)
				requireNoMarked(t, p.ID())
				requireGone(t, pids)
				if info.Leftovers < tt.outside+len(pids) {
					t.Errorf("Leftovers got %d, want at least %d", info.Leftovers, tt.outside+len(pids))
				}
			})
		}
	}
}

// waitComm waits until every pid runs a program named comm (has exec'd).
// An exec has no event a non-parent can wait on, so /proc is polled under
// the test deadline.
func waitComm(t *testing.T, pids []int, comm string) {
	t.Helper()
	ctx := testContext(t)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for _, pid := range pids {
		for {
			got, _ := agentproc.ProcFile(pid, "comm")
			if strings.TrimSpace(string(got)) == comm {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("pid %d: comm got %q, want %q", pid, got, comm)
			case <-tick.C:
			}
		}
	}
}

func TestEscapesSwept(t *testing.T) {
	t.Parallel()
	runEscapeMatrix(t, escapes)
}

func TestEscapesInCgroup(t *testing.T) {
	t.Parallel()
	parent := cgroupParent(t)
	runEscapeMatrix(t, append(slices.Clone(escapes), cgroupEscapes...), agentproc.WithCgroup(parent))
	t.Cleanup(func() {
		// Every process's cgroup is gone once its Manager is closed.
		if left, _ := filepath.Glob(filepath.Join(parent, "agentproc-*")); len(left) != 0 {
			t.Errorf("cgroups left in %s: got %v, want none", parent, left)
		}
	})
}

func TestCgroupUsage(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithCgroup(cgroupParent(t)))
	// The CPU is burnt by an escaped process the leader never waits for,
	// so only the cgroup can account for it.
	p := mustStart(t, m, agentproc.Request{Command: `(setsid sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done; exec sleep 1000' &); exec sleep 1000`})
	waitForOutput(t, p, regexp.MustCompile(`done`))
	info, err := p.Stop(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.CPUTime < 10*time.Millisecond {
		t.Errorf("CPUTime got %v, want the escaped loop's CPU time counted", info.CPUTime)
	}
}

func TestCgroupBadParent(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, parent, mention string
	}{
		{"relative", "agents", "not an absolute path"},
		{"missing", "/nonexistent/agentproc", "/nonexistent/agentproc"},
		{"not a cgroup", t.TempDir(), "is not in a cgroup hierarchy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, agentproc.WithCgroup(tt.parent))
			p, err := m.Start(t.Context(), agentproc.Request{Command: "true"})
			if err == nil {
				mustWait(t, p)
				t.Fatalf("Start: got a process, want an error")
			}
			if !strings.Contains(err.Error(), tt.mention) || !strings.Contains(err.Error(), tt.parent) {
				t.Errorf("error got %q, want it to name %q and say %q", err, tt.parent, tt.mention)
			}
			if !errors.Is(err, agentproc.ErrInvalidRequest) && !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("error got %v, want ErrInvalidRequest or errors.ErrUnsupported", err)
			}
		})
	}
}

// TestSweepSparesDecoys starts look-alike processes outside the Manager:
// the sweep must kill only exact MarkerEnv=<id> entries.
func TestSweepSparesDecoys(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "setsid sleep 1000 & echo ready; wait"})
	waitForOutput(t, p, regexp.MustCompile(`ready`))
	id := p.ID()
	decoyEnvs := [][]string{
		{agentproc.MarkerEnv + "=" + uuid.NewString()},
		{agentproc.MarkerEnv + "_X=" + id},
		{"X" + agentproc.MarkerEnv + "=" + id},
		{agentproc.MarkerEnv + "=" + id + "-other"},
		{agentproc.MarkerEnv + "=" + id[:len(id)-1]},
		{"FOO=" + agentproc.MarkerEnv + "=" + id},
	}
	var decoys []*exec.Cmd
	for _, env := range decoyEnvs {
		cmd := exec.Command("sleep", "1000")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		decoys = append(decoys, cmd)
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
	requireNoMarked(t, id)
	for i, cmd := range decoys {
		if !alive(cmd.Process.Pid) {
			t.Errorf("decoy %v: got killed, want alive", decoyEnvs[i])
		}
	}
}

// TestSweepRereadsEnvironMidExec: a marker read that catches a process
// between exec's switch to the new program's memory and the setup of its
// stack reads an empty environment, as a zombie's does; the kill sweep
// after the shell's exit took that for "no marker", so an escapee without
// a cgroup that was exec'ing at that moment survived. The hook has the
// sweep's first read of the escapee's environment see what such a read
// sees; the sweep reads it again and kills it. Not parallel: the hook is
// process-wide, and another test's sweep could take the read meant for
// this one.
func TestSweepRereadsEnvironMidExec(t *testing.T) {
	for _, h := range agentproc.EnvironHooks {
		t.Run(h.Name, func(t *testing.T) {
			info, fd, faked := sweepEscapee(t, h.Arm)
			if n := faked(); n != 1 {
				t.Fatalf("sweep reads of the escapee's environment that saw it empty: got %d, want 1", n)
			}
			if info.Leftovers != 1 {
				t.Errorf("Leftovers got %d, want 1", info.Leftovers)
			}
			if left := waitExited([]int{fd}, testTimeout); left != 0 {
				t.Errorf("the escapee whose first read was empty: got alive, want killed by the sweep")
			}
		})
	}
}

// sweepEscapee starts a tree that leaves a setsid escapee with the marker
// and no cgroup, arms hook (EmptyNextEnvironRead, EmptyEnvironReads) for
// the escapee, and SIGKILLs the shell behind the library's back, so that
// the kill sweep after the shell's exit is the first to look for escapees
// (no SIGTERM step reads them before). It returns the tree's Info, a pidfd
// of the escapee (killed when the test ends) and what hook returned.
func sweepEscapee(t *testing.T, hook func(testing.TB, int) func() int) (agentproc.Info, int, func() int) {
	t.Helper()
	m := newManager(t, agentproc.WithGracePeriod(5*time.Second))
	p := mustStart(t, m, agentproc.Request{Command: "setsid sleep 1000 >/dev/null 2>&1 & echo pid=$!; echo ready; exec sleep 1000"})
	waitForOutput(t, p, regexp.MustCompile(`ready`))
	pids := pidsIn(t, p.Output().Text)
	waitComm(t, pids, "sleep")
	waitMarked(t, p.ID(), "sleep", 1, p.Info().PID)
	fds := pinPIDs(t, pids)
	t.Cleanup(func() { _ = unix.PidfdSendSignal(fds[0], unix.SIGKILL, nil, 0) })
	faked := hook(t, pids[0])
	if err := unix.Kill(p.Info().PID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return mustWait(t, p), fds[0], faked // fails on the test deadline if the sweep never ends
}

// TestSweepEndsWithEnvironStuck: a process whose environment reads as an
// exec under way for good (stuck in exec on a hung file system, say) is
// read again for a bounded time only, so the kill sweep still ends; with
// nothing to prove it is the tree's, it is not signalled
// (docs/containment.md). Not parallel, as TestSweepRereadsEnvironMidExec.
func TestSweepEndsWithEnvironStuck(t *testing.T) {
	info, fd, faked := sweepEscapee(t, agentproc.EmptyEnvironReads)
	if n := faked(); n < 2 {
		t.Errorf("reads of the stuck escapee's environment: got %d, want it read again", n)
	}
	if info.Leftovers != 0 || waitExited([]int{fd}, 0) != 1 {
		t.Errorf("the escapee whose environment never said anything: got Leftovers %d and it signalled, want neither", info.Leftovers)
	}
}

// cgroupParent returns a fresh cgroup v2 directory for the test's
// processes, removed at the end, or skips the test saying why there is
// none. The hierarchy is found from /proc/self/mountinfo (hybrid hosts
// mount it at /sys/fs/cgroup/unified); the test's own cgroup is tried
// first, since that is where an unprivileged user may have been delegated
// one, then each mount's root.
func cgroupParent(t *testing.T) string {
	t.Helper()
	var candidates, tried []string
	mounts := testCgroup2Mounts()
	if len(mounts) == 0 {
		t.Skip("no cgroup v2 hierarchy in /proc/self/mountinfo")
	}
	if data, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for line := range strings.Lines(string(data)) {
			if rel, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
				for _, mnt := range mounts {
					candidates = append(candidates, filepath.Join(mnt, rel))
				}
			}
		}
	}
	candidates = append(candidates, mounts...)
	for _, c := range slices.Compact(candidates) {
		dir := filepath.Join(c, "agentproc-test-"+uuid.NewString()[:8])
		if err := agentproc.MakeTestCgroup(t, dir, filepath.Join(dir, "agentproc-*")); err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		if unix.Access(filepath.Join(dir, "cgroup.procs"), unix.W_OK) != nil {
			_ = os.Remove(dir)
			tried = append(tried, c+": cgroup.procs not writable")
			continue
		}
		return dir
	}
	t.Skipf("no writable cgroup v2 directory: tried %s", strings.Join(tried, "; "))
	return ""
}

func testCgroup2Mounts() []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var mounts []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f := strings.Fields(pre)
		if ok && len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			mounts = append(mounts, f[4])
		}
	}
	return mounts
}
