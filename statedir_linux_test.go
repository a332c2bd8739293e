package agentproc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// Helper hosts: the helper modes "host-three" and "host-detach" (see
// helper_test.go; the second in detach_linux_test.go) are programs that use
// a Manager with a state dir and are then SIGKILLed by the test. These
// variables configure them.
const (
	hostDirEnv    = "AGENTPROC_TEST_HOST_DIR"
	hostCgroupEnv = "AGENTPROC_TEST_HOST_CGROUP"
	hostFIFOEnv   = "AGENTPROC_TEST_HOST_FIFO" // two FIFOs, space-separated
)

func init() {
	agentproc.RegisterHelper("host-three", runThreeTreesHost, false)
}

// runThreeTreesHost starts processes whose commands print "pids A B" (the
// shell and a child), prints each such line, then "ready", and blocks until
// killed: a plain tree and a setsid escapee on dir/a, and, when
// hostCgroupEnv names a cgroup parent, a tree in a cgroup on dir/b.
func runThreeTreesHost() int {
	dir := os.Getenv(hostDirEnv)
	type job struct {
		m       *agentproc.Manager
		command string
	}
	logs := agentproc.WithOutputLog(filepath.Join(dir, "logs"), 0)
	a := agentproc.New(agentproc.WithStateDir(filepath.Join(dir, "a")), logs)
	jobs := []job{
		{a, `sleep 300 & echo "pids $$ $!"; wait`},
		{a, `setsid sleep 300 & echo "pids $$ $!"; wait`},
	}
	if cg := os.Getenv(hostCgroupEnv); cg != "" {
		b := agentproc.New(agentproc.WithStateDir(filepath.Join(dir, "b")), agentproc.WithCgroup(cg), logs)
		jobs = append(jobs, job{b, `sleep 300 & echo "pids $$ $!"; wait`})
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, j := range jobs {
		p, line := hostStart(ctx, j.m, agentproc.Request{Command: j.command})
		if p == nil {
			return 1
		}
		// The output log is written behind the buffer; recovery shows what
		// it holds, so the host waits until the line is on disk. The file
		// is the only event there is.
		tick := time.NewTicker(time.Millisecond)
		for {
			if data, _ := os.ReadFile(p.Info().LogPath); strings.Contains(string(data), line) {
				break
			}
			select {
			case <-ctx.Done():
				fmt.Fprintln(os.Stderr, "host: the output log never got", line)
				return 1
			case <-tick.C:
			}
		}
		tick.Stop()
		fmt.Println(strings.TrimSpace(line), p.ID())
	}
	fmt.Println("ready")
	select {} // until the test SIGKILLs this host
}

// hostStart starts req on m in a helper host and returns the process and
// the "pids A B" line its command printed; it says why on stderr and
// returns a nil process if either fails.
func hostStart(ctx context.Context, m *agentproc.Manager, req agentproc.Request) (*agentproc.Process, string) {
	p, err := m.Start(ctx, req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "host: start:", err)
		return nil, ""
	}
	line, err := p.WaitMatch(ctx, regexp.MustCompile(`^pids \d+ \d+$`))
	if err != nil {
		fmt.Fprintln(os.Stderr, "host: wait for pids:", err)
		return nil, ""
	}
	return p, line
}

// startHost runs the helper host mode (from UseHelper) and returns it with
// the PIDs and process IDs it printed once it said "ready".
func startHost(t *testing.T, mode string, env ...string) (*exec.Cmd, []int, []string) {
	t.Helper()
	return startHostWith(t, mode, nil, env...)
}

// startHostWith is startHost with attr as the host's SysProcAttr.
func startHostWith(t *testing.T, mode string, attr *syscall.SysProcAttr, env ...string) (*exec.Cmd, []int, []string) {
	t.Helper()
	cmd, lines := runHost(t, mode, attr, env...)
	var pids []int
	var ids []string
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "pids" {
			t.Fatalf("host printed %q", line)
		}
		for _, s := range f[1:3] {
			pid, _ := strconv.Atoi(s)
			pids = append(pids, pid)
		}
		ids = append(ids, f[3])
	}
	return cmd, pids, ids
}

// runHost runs the helper host mode with attr as its SysProcAttr and
// returns it with the lines it printed before "ready". The host is killed
// when the test ends.
func runHost(t *testing.T, mode string, attr *syscall.SysProcAttr, env ...string) (*exec.Cmd, []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.SysProcAttr = attr
	cmd.Env = append(append(os.Environ(), agentproc.HelperEnv+"="+mode), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	type result struct {
		lines []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				done <- r
				return
			}
			r.lines = append(r.lines, sc.Text())
		}
		r.err = fmt.Errorf("host output ended before ready (after %q): %v", r.lines, sc.Err())
		done <- r
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return cmd, r.lines
	case <-testContext(t).Done():
		t.Fatal("host did not get ready")
	}
	return nil, nil
}

// pinPIDs opens a pidfd for each pid, so that their exit can be waited for
// and a reused PID cannot be mistaken for them.
func pinPIDs(t *testing.T, pids []int) []int {
	t.Helper()
	fds := make([]int, len(pids))
	for i, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd_open(%d): %v", pid, err)
		}
		fds[i] = fd
		t.Cleanup(func() { _ = unix.Close(fd) })
	}
	return fds
}

// waitExited waits up to timeout until every pidfd polls readable (its
// process has exited) and returns how many are still alive.
func waitExited(fds []int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	pfds := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	for len(pfds) > 0 {
		left := time.Until(deadline)
		if left < 0 {
			left = 0
		}
		n, err := unix.Poll(pfds, int(left/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			break
		}
		waiting := pfds[:0]
		for _, p := range pfds {
			if p.Revents == 0 {
				waiting = append(waiting, p)
			}
		}
		pfds = waiting
	}
	return len(pfds)
}

func pidfdAlive(t *testing.T, fd int) bool {
	t.Helper()
	return waitExited([]int{fd}, 0) == 1
}

// TestHostDeathKillsTrees is the crash test: a host with three trees (a
// plain one, a setsid escapee, one in a cgroup when available) is
// SIGKILLed. Its guard kills every tree within 2 s with no new Manager,
// and a new Manager on the same dir reports them all as orphaned.
func TestHostDeathKillsTrees(t *testing.T) {
	t.Parallel()
	mode := agentproc.UseHelper("host-three") // before cgroupParent's skip
	dir := t.TempDir()
	env := []string{hostDirEnv + "=" + dir}
	want := 2
	if os.Geteuid() == 0 && len(testCgroup2Mounts()) > 0 {
		// As root with cgroup v2 mounted a writable parent is expected;
		// cgroupParent skips, saying why, if there is none.
		env = append(env, hostCgroupEnv+"="+cgroupParent(t))
		want = 3
	}
	host, pids, ids := startHost(t, mode, env...)
	if len(ids) != want {
		t.Fatalf("host started %d processes, want %d", len(ids), want)
	}
	fds := pinPIDs(t, pids)

	killed := time.Now()
	if err := host.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	left := waitExited(fds, 2*time.Second)
	elapsed := time.Since(killed)
	if left != 0 {
		t.Fatalf("%d of %d processes alive 2 s after the host was SIGKILLed, want 0", left, len(fds))
	}
	t.Logf("all %d processes of %d trees dead %v after the host's SIGKILL", len(fds), want, elapsed)
	// The guard acts on the pipe's EOF, which a dying host can give before
	// it has closed its other files, the state dirs' locks among them:
	// under make stress a Recovered made right after the trees died found
	// dir a still locked. Reaped, the host has closed them all.
	_ = host.Wait()

	got := map[string]agentproc.Info{}
	for _, sub := range []string{"a", "b"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); err != nil {
			continue
		}
		// The output logs are found by ID in this Manager's log dir.
		m := newManager(t, agentproc.WithStateDir(filepath.Join(dir, sub)), agentproc.WithGracePeriod(time.Second),
			agentproc.WithOutputLog(filepath.Join(dir, "logs"), 0))
		infos, err := m.Recovered(testContext(t))
		if err != nil {
			t.Fatalf("Recovered(%s): %v", sub, err)
		}
		for _, info := range infos {
			got[info.ID] = info
			p, err := m.Get(info.ID)
			if err != nil || p.Info().Reason != agentproc.ReasonOrphaned {
				t.Fatalf("Get(%s) after recovery: got %v, %v, want the orphaned process", info.ID, p, err)
			}
			// The output log is all that is left of the output.
			if out := p.Output().Text; !strings.HasPrefix(out, "pids ") {
				t.Errorf("recovered output of %s: got %q, want what its log holds", info.ID, out)
			}
		}
	}
	for _, id := range ids {
		info, ok := got[id]
		if !ok {
			t.Errorf("process %s not recovered; recovered %v", id, got)
			continue
		}
		if info.Running || info.Reason != agentproc.ReasonOrphaned || exitCode(info) != -1 {
			t.Errorf("recovered %s: got running=%v reason=%q code=%d, want exited, %q, -1",
				id, info.Running, info.Reason, exitCode(info), agentproc.ReasonOrphaned)
		}
	}
}

// deadHost is a host identity no live process has: the PID is above the
// kernel's largest pid_max.
var deadHost = map[string]any{"pid": 1 << 23, "start": 1, "boot_id": currentBoot()}

func currentBoot() string {
	data, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(data))
}

// startTicks returns pid's start time as a state record keeps it.
func startTicks(t testing.TB, pid int) uint64 {
	t.Helper()
	n, ok := agentproc.ProcStartTime(pid)
	if !ok {
		t.Fatalf("start time of %d: cannot read /proc/%d/stat", pid, pid)
	}
	return n
}

// startDecoy starts an unrelated process (no marker, a group of its own)
// and returns its PID and a pidfd for it.
func startDecoy(t *testing.T) (int, int) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd.Process.Pid, pinPIDs(t, []int{cmd.Process.Pid})[0]
}

// writeRecord writes a record the way a dead Manager would have, with
// fields overriding the defaults of a running process.
func writeRecord(t testing.TB, dir, id string, fields map[string]any) {
	t.Helper()
	rec := map[string]any{
		"version":    1,
		"id":         id,
		"command":    "sleep 300",
		"workdir":    "/",
		"marker":     agentproc.MarkerEnv + "=" + id,
		"started_at": time.Now(),
		"manager":    uuid.NewString(),
		"host":       deadHost,
	}
	for k, v := range fields {
		rec[k] = v
	}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "procs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "procs", id+".json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryPIDReuse: a record whose leader PID now belongs to an
// unrelated process (same PID, another start time) is recovered as gone,
// and that process is never signalled.
func TestRecoveryPIDReuse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pid, fd := startDecoy(t)
	id := uuid.NewString()
	writeRecord(t, dir, id, map[string]any{
		"leader": map[string]any{"pid": pid, "start": startTicks(t, pid) + 1, "boot_id": currentBoot()},
	})
	m := newManager(t, agentproc.WithStateDir(dir), agentproc.WithGracePeriod(100*time.Millisecond))
	infos, err := m.Recovered(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].ID != id || infos[0].Reason != agentproc.ReasonOrphaned || infos[0].Leftovers != 0 {
		t.Fatalf("Recovered: got %+v, want %s orphaned with no leftovers", infos, id)
	}
	// Recovered returns after the whole stop ladder (grace included), so a
	// signal sent to the decoy would have ended it by now.
	if !pidfdAlive(t, fd) {
		t.Fatal("the unrelated process holding the recorded PID was signalled")
	}
}

// TestRecoveryBadState: corrupt and truncated records, a record from
// another boot and one whose host is alive are each skipped or recovered
// without a signal to anyone, and recovery of the rest goes on.
func TestRecoveryBadState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pid, fd := startDecoy(t)
	decoy := map[string]any{"pid": pid, "start": startTicks(t, pid), "boot_id": currentBoot()}

	otherBoot := uuid.NewString()
	writeRecord(t, dir, otherBoot, map[string]any{
		// The decoy's real identity, but on another boot: nothing of that
		// boot can be alive.
		"leader": map[string]any{"pid": pid, "start": decoy["start"], "boot_id": uuid.NewString()},
		"host":   map[string]any{"pid": 1 << 23, "start": 1, "boot_id": uuid.NewString()},
	})
	liveHost := uuid.NewString()
	writeRecord(t, dir, liveHost, map[string]any{"leader": decoy, "host": decoy})
	good := uuid.NewString()
	writeRecord(t, dir, good, nil)
	valid, err := os.ReadFile(filepath.Join(dir, "procs", good+".json"))
	if err != nil {
		t.Fatal(err)
	}
	truncated := uuid.NewString()
	procs := filepath.Join(dir, "procs")
	// A reused slot: the dropped record, its tombstone, then the current
	// one. Only the current one is recovered.
	reused := uuid.NewString()
	writeRecord(t, dir, reused, nil)
	current, err := os.ReadFile(filepath.Join(procs, reused+".json"))
	if err != nil {
		t.Fatal(err)
	}
	dropped := bytes.Replace(valid, []byte(good), []byte(uuid.NewString()), -1)
	slot := append(append(dropped, "{\"dropped\":true}\n"...), current...)
	if err := os.WriteFile(filepath.Join(procs, reused+".json"), slot, 0o600); err != nil {
		t.Fatal(err)
	}
	// A free slot: nothing after the tombstone.
	if err := os.WriteFile(filepath.Join(procs, "free.json"), append(dropped, "{\"dropped\":true}\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(procs, truncated+".json"), valid[:len(valid)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(procs, "corrupt.json"), []byte("{\x00not json"), 0o600); err != nil {
		t.Fatal(err)
	}

	m := newManager(t, agentproc.WithStateDir(dir), agentproc.WithGracePeriod(100*time.Millisecond))
	infos, err := m.Recovered(testContext(t))
	if err != nil {
		t.Fatalf("Recovered: %v", err)
	}
	got := map[string]agentproc.ExitReason{}
	for _, info := range infos {
		got[info.ID] = info.Reason
	}
	want := map[string]agentproc.ExitReason{
		otherBoot: agentproc.ReasonOrphaned, good: agentproc.ReasonOrphaned, reused: agentproc.ReasonOrphaned,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Recovered: got %v, want %v", got, want)
	}
	for _, name := range []string{truncated + ".json.bad", "corrupt.json.bad", liveHost + ".json"} {
		if _, err := os.Stat(filepath.Join(procs, name)); err != nil {
			t.Errorf("want %s kept: %v", name, err)
		}
	}
	if !pidfdAlive(t, fd) {
		t.Fatal("the live process named by the other-boot and live-host records was signalled")
	}
}

// TestStateDirUnusable: a dir that cannot be created and a dir locked by a
// live Manager each make Start and Recovered fail with an error naming the
// dir and the reason.
func TestStateDirUnusable(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held := t.TempDir()
	holder := newManager(t, agentproc.WithStateDir(held))
	if _, err := holder.Recovered(testContext(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, reason string
	}{
		{filepath.Join(file, "state"), "cannot be created"},
		{held, fmt.Sprintf("is not usable: held by another Manager (host PID %d), which is still running", os.Getpid())},
	} {
		m := newManager(t, agentproc.WithStateDir(tc.dir))
		_, err := m.Start(t.Context(), agentproc.Request{Command: "true"})
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(tc.dir)) || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("Start with state dir %s: got %v, want an error naming it and %q", tc.dir, err, tc.reason)
		}
		if _, rerr := m.Recovered(testContext(t)); rerr == nil || rerr.Error() != fmt.Sprint(err) {
			t.Errorf("Recovered: got %v, want %v", rerr, err)
		}
	}
}

// TestStateRecords: a running process's record names its leader, host and
// marker; the exit is recorded; retention and Close remove records; a
// Manager started after a clean Close recovers nothing.
func TestStateRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := agentproc.New(agentproc.WithStateDir(dir), agentproc.WithGracePeriod(time.Second))
	defer m.Close()
	read := func(id string) map[string]any {
		t.Helper()
		rec := findRecord(t, dir, id)
		if rec == nil {
			t.Fatalf("no record of %s", id)
		}
		return rec
	}
	p := mustStart(t, m, agentproc.Request{Command: "sleep 300", Key: "k"})
	if rec := read(p.ID()); rec["marker"] != agentproc.MarkerEnv+"="+p.ID() {
		t.Errorf("record right after Start: got %v, want the marker", rec)
	}
	// The supervisor appends the leader's identity once the shell runs,
	// concurrently with the caller; the record file is the only event.
	rec := read(p.ID())
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for ctx := testContext(t); rec["leader"].(map[string]any)["pid"] == float64(0); rec = read(p.ID()) {
		select {
		case <-ctx.Done():
			t.Fatalf("record never got the leader: %v", rec)
		case <-tick.C:
		}
	}
	leader, _ := rec["leader"].(map[string]any)
	host, _ := rec["host"].(map[string]any)
	if leader["pid"] != float64(p.Info().PID) || leader["start"] == float64(0) || leader["boot_id"] != currentBoot() ||
		host["pid"] != float64(os.Getpid()) || rec["marker"] != agentproc.MarkerEnv+"="+p.ID() ||
		rec["key"] != "k" || rec["exited"] != nil {
		t.Errorf("record of a running process: got %v", rec)
	}
	e := mustStart(t, m, agentproc.Request{Command: "exit 7"})
	mustWait(t, e)
	if rec := read(e.ID()); rec["exited"] != true || rec["exit_code"] != float64(7) || rec["reason"] != "exited" {
		t.Errorf("record of an exited process: got %v", rec)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n := recordCount(t, dir); n != 0 {
		t.Errorf("records after Close: got %d, want none (empty slots may stay)", n)
	}

	m2 := newManager(t, agentproc.WithStateDir(dir), agentproc.WithRetention(0, 0))
	if infos, err := m2.Recovered(testContext(t)); err != nil || len(infos) != 0 {
		t.Errorf("Recovered after a clean Close: got %v, %v, want nothing", infos, err)
	}
	q := mustStart(t, m2, agentproc.Request{Command: "true"})
	mustWait(t, q)
	if _, err := m2.Get(q.ID()); !errors.Is(err, agentproc.ErrNotFound) {
		t.Fatalf("Get after retention: got %v, want ErrNotFound", err)
	}
	agentproc.WaitStateIdle(m2)
	if rec := findRecord(t, dir, q.ID()); rec != nil {
		t.Errorf("record after retention dropped the process: got %v, want it removed", rec)
	}
}

// findRecord returns the record of process id in the state dir, with its
// updates applied, or nil. A record file holds one JSON line, then a line
// per update of some of its fields; file names say nothing (see
// stateDir.create).
func findRecord(t *testing.T, dir, id string) map[string]any {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "procs", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// A slot file: only what follows the last tombstone is current.
		if i := strings.LastIndex(string(data), "{\"dropped\":true}\n"); i >= 0 {
			data = data[i+len("{\"dropped\":true}\n"):]
		}
		if len(data) == 0 {
			continue
		}
		rec := map[string]any{}
		for line := range strings.Lines(string(data)) {
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("record file %s: %v", f, err)
			}
		}
		if rec["id"] == id {
			return rec
		}
	}
	return nil
}

// recordCount counts the record files in the state dir that hold a
// record.
func recordCount(t *testing.T, dir string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "procs", "*.json"))
	n := 0
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if len(data) > 0 && !strings.HasSuffix(string(data), "{\"dropped\":true}\n") {
			n++
		}
	}
	return n
}

// TestRecoveryStopsLiveOrphans: trees still running when a new Manager
// starts (their host and its guard both died) are stopped by recovery and
// counted: one found by its process group (the leader still has its
// recorded start time) and its child that cleared its environment, one
// found only by the marker (a record written before the shell's PID was).
func TestRecoveryStopsLiveOrphans(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	byGroup, byMarker := uuid.NewString(), uuid.NewString()
	start := func(id, command string) *exec.Cmd {
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
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		// The command says when its child runs.
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	// A child without the marker, in the leader's group.
	g := start(byGroup, `env -i sleep 300 & echo ready; wait`)
	m := start(byMarker, `echo ready; exec sleep 300`)
	writeRecord(t, dir, byGroup, map[string]any{
		"leader": map[string]any{"pid": g.Process.Pid, "start": startTicks(t, g.Process.Pid), "boot_id": currentBoot()},
	})
	writeRecord(t, dir, byMarker, nil)
	fds := pinPIDs(t, []int{g.Process.Pid, m.Process.Pid})

	mgr := newManager(t, agentproc.WithStateDir(dir), agentproc.WithGracePeriod(time.Second))
	infos, err := mgr.Recovered(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, info := range infos {
		if info.Reason != agentproc.ReasonOrphaned {
			t.Errorf("%s: reason got %q, want %q", info.ID, info.Reason, agentproc.ReasonOrphaned)
		}
		got[info.ID] = info.Leftovers
	}
	if want := map[string]int{byGroup: 2, byMarker: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Leftovers by process: got %v, want %v", got, want)
	}
	// The leaders are the test's children, so they are zombies now, which
	// pidfds report as exited.
	if left := waitExited(fds, 0); left != 0 {
		t.Errorf("%d orphans alive after Recovered, want 0", left)
	}
}

// TestRemoveDropsStateRecord: Remove deletes the record as retention does,
// so a later Manager on the dir recovers nothing of it.
func TestRemoveDropsStateRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newManager(t, agentproc.WithStateDir(dir))
	p := mustStart(t, m, agentproc.Request{Command: "exit 3"})
	mustWait(t, p)
	agentproc.WaitStateIdle(m)
	if rec := findRecord(t, dir, p.ID()); rec == nil {
		t.Fatalf("no record of the exited process before Remove")
	}
	if err := m.Remove(p.ID()); err != nil {
		t.Fatalf("Remove: got %v, want nil", err)
	}
	agentproc.WaitStateIdle(m)
	if rec := findRecord(t, dir, p.ID()); rec != nil {
		t.Errorf("record after Remove: got %v, want it removed", rec)
	}
}
