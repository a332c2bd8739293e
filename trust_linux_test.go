package agentproc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cdr.dev/slog/v3"
	"github.com/coder/quartz"
	"github.com/google/uuid"

	"github.com/agentproc/agentproc"
)

// The tests of issue 24: a state dir and its records may have been written
// by another hand, and a detached process meets the corner cases an
// attached one already handles. Each test fails on the code before the fix.

// nobodyUID returns the uid and gid of the user nobody, skipping when the
// test cannot hand a file to another user.
func nobodyUID(t *testing.T) (int, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a dir owned by another user")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}

// victimFile makes a file outside every state dir that a planted symlink
// points to, and returns its path and contents.
func victimFile(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "precious")
	content := "precious " + uuid.NewString() + "\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, content
}

func requireContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Errorf("%s: got %q (%v), want it untouched: %q", path, got, err, want)
	}
}

// refused checks that a Manager on dir fails Start and Recovered with one
// error that contains every one of want, and runs nothing.
func refused(t *testing.T, dir string, want ...string) {
	t.Helper()
	m := newManager(t, agentproc.WithStateDir(dir))
	ran := filepath.Join(t.TempDir(), "ran")
	_, err := m.Start(t.Context(), agentproc.Request{Command: "touch " + ran})
	if err == nil {
		t.Fatalf("Start with state dir %s: got no error, want it refused", dir)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Start with state dir %s: got %v, want it to say %q", dir, err, w)
		}
	}
	if _, rerr := m.Recovered(testContext(t)); rerr == nil || rerr.Error() != err.Error() {
		t.Errorf("Recovered: got %v, want %v", rerr, err)
	}
	if _, serr := os.Stat(ran); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("the command ran although the state dir was refused")
	}
}

// Row 1: an existing state dir of another user, or one others may write
// to, is refused with an error naming the path, the owner and the mode;
// nothing in it is read, written or removed, so a planted lock symlink
// does not make the Manager overwrite its target. A lock symlink in a dir
// of our own is not followed either.
func TestStateDirNotPrivate(t *testing.T) {
	t.Parallel()
	uid, gid := nobodyUID(t)
	victim, content := victimFile(t)

	foreign := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(foreign, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(foreign, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(foreign, "lock")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(foreign, "lock"), uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(foreign, uid, gid); err != nil {
		t.Fatal(err)
	}
	refused(t, foreign, strconv.Quote(foreign), "uid "+strconv.Itoa(uid)+" (nobody)", "mode 0777")

	// Ours, but writable by others: someone else may have planted the lock.
	shared := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(shared, "lock")); err != nil {
		t.Fatal(err)
	}
	refused(t, shared, strconv.Quote(shared), "mode 1777", "not writable by group or others")

	// Private, with a symlink planted earlier as the lock.
	planted := t.TempDir()
	if err := os.Symlink(victim, filepath.Join(planted, "lock")); err != nil {
		t.Fatal(err)
	}
	refused(t, planted, strconv.Quote(planted), "lock")

	// The state dir itself a symlink to a private dir.
	link := filepath.Join(t.TempDir(), "state")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	refused(t, link, strconv.Quote(link), "symlink")

	requireContent(t, victim, content)
	for _, dir := range []string{foreign, shared} {
		if _, err := os.Lstat(filepath.Join(dir, "procs")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s/procs: got %v, want nothing created in a refused dir", dir, err)
		}
	}
}

// Row 2: a planted out symlink (out -> a user's home) with a record whose
// ID names a dir there never makes Close delete that dir, and a planted
// out/ID symlink is never read through.
func TestStateDirOutSymlink(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	docs := filepath.Join(home, "Documents")
	if err := os.Mkdir(docs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(docs, "seg-0"), []byte("secret document\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeRecord(t, dir, "Documents", map[string]any{"detached": true, "seg_bytes": 4096, "exited": true})
	if err := os.Symlink(home, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	m := agentproc.New(agentproc.WithStateDir(dir))
	if _, err := m.Recovered(testContext(t)); err == nil || !strings.Contains(err.Error(), "out") {
		t.Errorf("Recovered with out a symlink: got %v, want the dir refused, naming out", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	requireContent(t, filepath.Join(docs, "seg-0"), "secret document\n")

	// out is a real dir, out/ID a symlink to the user's files.
	dir2 := t.TempDir()
	id := uuid.NewString()
	writeRecord(t, dir2, id, map[string]any{"detached": true, "seg_bytes": 4096, "exited": true})
	if err := os.Mkdir(filepath.Join(dir2, "out"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(docs, filepath.Join(dir2, "out", id)); err != nil {
		t.Fatal(err)
	}
	m2 := agentproc.New(agentproc.WithStateDir(dir2))
	infos, err := m2.Recovered(testContext(t))
	if err != nil || len(infos) != 1 {
		t.Fatalf("Recovered: got %v, %v, want the one record", infos, err)
	}
	p, err := m2.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if out := p.Output().Text; strings.Contains(out, "secret") {
		t.Errorf("output of the recovered process: got %q, read through the planted out/ID symlink", out)
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	requireContent(t, filepath.Join(docs, "seg-0"), "secret document\n")
}

// Row 3: a record's log_path is never read nor deleted: the recovered
// output comes from the log the ID names in this Manager's log dir, and a
// symlink planted there is not followed.
func TestRecoveryLogPathNotTrusted(t *testing.T) {
	t.Parallel()
	secret, content := victimFile(t)
	linked, linkedContent := victimFile(t)
	logs := t.TempDir()
	dir := t.TempDir()
	byPath, byLink := uuid.NewString(), uuid.NewString()
	writeRecord(t, dir, byPath, map[string]any{"log_path": secret, "exited": true})
	writeRecord(t, dir, byLink, map[string]any{"log_path": filepath.Join(logs, byLink+".log"), "exited": true})
	if err := os.Symlink(linked, filepath.Join(logs, byLink+".log")); err != nil {
		t.Fatal(err)
	}
	m := agentproc.New(agentproc.WithStateDir(dir), agentproc.WithOutputLog(logs, 0), agentproc.WithRetention(0, 0))
	infos, err := m.Recovered(testContext(t))
	if err != nil || len(infos) != 2 {
		t.Fatalf("Recovered: got %v, %v, want the two records", infos, err)
	}
	for _, info := range infos {
		if want := filepath.Join(logs, info.ID+".log"); info.LogPath != want {
			t.Errorf("LogPath of %s: got %q, want %q (derived from the ID)", info.ID, info.LogPath, want)
		}
		if p, err := m.Get(info.ID); err == nil && strings.Contains(p.Output().Text, "precious") {
			t.Errorf("output of %s: got %q, want nothing read through the record's path or a symlink", info.ID, p.Output().Text)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	requireContent(t, secret, content)
	requireContent(t, linked, linkedContent)
}

// Row 4: a record naming a live process of someone else with its true
// start time and boot ID (both world-readable) does not get it signalled:
// it does not carry the tree's marker.
func TestRecoveryForeignLeader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pid, fd := startDecoy(t)
	id := uuid.NewString()
	writeRecord(t, dir, id, map[string]any{
		"leader": map[string]any{"pid": pid, "start": startTicks(t, pid), "boot_id": currentBoot()},
	})
	m := newManager(t, agentproc.WithStateDir(dir), agentproc.WithGracePeriod(100*time.Millisecond))
	infos, err := m.Recovered(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Leftovers != 0 {
		t.Errorf("Recovered: got %+v, want the record with no leftovers", infos)
	}
	if !pidfdAlive(t, fd) {
		t.Fatal("the foreign process the record named as its leader was signalled")
	}
}

// Row 6 and the range checks: records with negative segment sizes, a
// non-UUID ID, a leader or runner that cannot be a tree of ours are each
// skipped with one warning naming the file, never acted on; the host
// survives (a negative segment size used to panic recovery).
func TestRecoveryRecordRanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pid, fd := startDecoy(t)
	own := map[string]any{"pid": os.Getpid(), "start": startTicks(t, os.Getpid()), "boot_id": currentBoot()}
	bad := map[string]map[string]any{
		"negative-seg": {"detached": true, "seg_bytes": -1},
		"zero-seg":     {"detached": true, "seg_bytes": 0},
		"host-leader":  {"leader": own},
		"minus-leader": {"leader": map[string]any{"pid": -pid, "start": 1, "boot_id": currentBoot()}},
		"one-runner":   {"detached": true, "seg_bytes": 4096, "runner": map[string]any{"pid": 1, "start": 1, "boot_id": currentBoot()}},
	}
	files := map[string]string{}
	for name, fields := range bad {
		id := uuid.NewString()
		writeRecord(t, dir, id, fields)
		files[name] = id + ".json"
	}
	// With a segment to read, a negative size used to panic the follower.
	segDir := filepath.Join(dir, "out", strings.TrimSuffix(files["negative-seg"], ".json"))
	if err := os.MkdirAll(segDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(segDir, "seg-0"), []byte("output\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeRecord(t, dir, "not-a-uuid", nil)
	files["not-a-uuid"] = "not-a-uuid.json"
	good := uuid.NewString()
	writeRecord(t, dir, good, nil)

	var sink agentproc.WarnSink
	m := newManager(t, agentproc.WithStateDir(dir), agentproc.WithLogger(slog.Make(&sink)),
		agentproc.WithGracePeriod(100*time.Millisecond))
	infos, err := m.Recovered(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].ID != good {
		t.Errorf("Recovered: got %+v, want only %s", infos, good)
	}
	lines := sink.Lines()
	for name, file := range files {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, filepath.Join(dir, "procs", file)) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("record %s: got %d warnings naming %s, want 1; warnings: %q", name, n, file, lines)
		}
	}
	if !pidfdAlive(t, fd) {
		t.Error("the process a bad record named was signalled")
	}
}

// Row 5: a record whose leader is PID 1 (with its true start time) never
// leads to kill(-1): checked inside a throwaway PID namespace, where the
// test binary is PID 1 and kill(-1) would reach everything else.
func TestRecoveryLeaderPID1(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	rerun(t, syscall.CLONE_NEWPID|syscall.CLONE_NEWNS, "^TestRecoveryLeaderPID1InNamespace$",
		[]string{"TestRecoveryLeaderPID1InNamespace"}, newProcEnv+"=1")
}

func TestRecoveryLeaderPID1InNamespace(t *testing.T) {
	requireInner(t)
	if os.Getpid() != 1 {
		t.Fatalf("pid got %d, want 1 (a private PID namespace)", os.Getpid())
	}
	dir := t.TempDir()
	_, fd := startDecoy(t)
	id := uuid.NewString()
	writeRecord(t, dir, id, map[string]any{
		"leader": map[string]any{"pid": 1, "start": startTicks(t, 1), "boot_id": currentBoot()},
	})
	var sink agentproc.WarnSink
	m := newManager(t, agentproc.WithStateDir(dir), agentproc.WithLogger(slog.Make(&sink)),
		agentproc.WithGracePeriod(100*time.Millisecond))
	infos, err := m.Recovered(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 0 {
		t.Errorf("Recovered: got %+v, want the record skipped", infos)
	}
	n := 0
	for _, l := range sink.Lines() {
		if strings.Contains(l, id+".json") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("warnings: got %q, want one naming %s.json", sink.Lines(), id)
	}
	if !pidfdAlive(t, fd) {
		t.Fatal("a record naming PID 1 got another process killed")
	}
}

// stopAtEnd stops a detached process at the end of the test (before its
// Manager's Close, which would leave it running).
func stopAtEnd(t *testing.T, p *agentproc.Process) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		_, _ = p.Stop(ctx)
	})
}

// ppidOf returns pid's parent from /proc/PID/stat.
func ppidOf(t *testing.T, pid int) int {
	t.Helper()
	data, err := agentproc.ProcFile(pid, "stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// Row 7: Signal on a detached process whose runner lives on (draining an
// escapee's output) but whose shell is gone and its PID reused by an
// unrelated group leader reaches nobody: the shell is verified before
// every kill(-pgid). In a private PID namespace, where ns_last_pid picks
// the next PID.
func TestDetachSignalAfterPIDReuse(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	rerun(t, syscall.CLONE_NEWPID|syscall.CLONE_NEWNS, "^TestDetachSignalAfterPIDReuseInNamespace$",
		[]string{"TestDetachSignalAfterPIDReuseInNamespace"}, newProcEnv+"=1")
}

func TestDetachSignalAfterPIDReuseInNamespace(t *testing.T) {
	requireInner(t)
	if os.Getpid() != 1 {
		t.Fatalf("pid got %d, want 1 (a private PID namespace)", os.Getpid())
	}
	m := newManager(t, agentproc.WithStateDir(t.TempDir()))
	// Other processes of the namespace (the runner, the guard, this one's
	// new threads) may take the PID between the decoy's setting of
	// ns_last_pid and its fork; a try that loses it is run again.
	for try := range 5 {
		if reuseAndSignal(t, m) {
			return
		}
		t.Logf("try %d: another process of the namespace took the PID first", try+1)
	}
	t.Fatal("could not start a decoy with the shell's PID in 5 tries")
}

// reuseAndSignal starts a detached process whose shell exits while its
// runner waits out the drain of an escapee's output, starts a decoy group
// leader with the shell's PID and signals the detached process: the decoy
// must survive. It returns false when the decoy did not get the PID.
func reuseAndSignal(t *testing.T, m *agentproc.Manager) bool {
	t.Helper()
	fifo := makeFIFOs(t, 1)[0]
	// The escapee keeps the output pipe open, so the runner waits out its
	// drain after the shell has exited and been reaped.
	p := mustStart(t, m, agentproc.Request{
		Command: `exec 3<>` + fifo + `; setsid sleep 60 & read -r x <&3; exit 0`,
		Detach:  true,
	})
	stopAtEnd(t, p)
	shell := p.Info().PID
	runner := pinPIDs(t, []int{ppidOf(t, shell)})[0]
	shellFD := pinPIDs(t, []int{shell})[0]
	warmThreads(16)
	writeFIFO(t, fifo, "go")
	if waitExited([]int{shellFD}, testTimeout) != 0 {
		t.Fatal("the shell did not exit")
	}
	// Reaped by the runner: its PID is free.
	reaped := time.NewTicker(time.Millisecond)
	defer reaped.Stop()
	for ctx := testContext(t); procExists(shell); {
		select {
		case <-ctx.Done():
			t.Fatal("the shell was never reaped")
		case <-reaped.C:
		}
	}
	if decoy := startGroupWithPID(t, shell); decoy != shell {
		return false
	}
	err := p.Signal(agentproc.SignalKill)
	if !pidfdAlive(t, runner) {
		t.Fatal("the runner exited before the signal: nothing was checked")
	}
	if !errors.Is(err, agentproc.ErrNotRunning) {
		t.Errorf("Signal after the shell is gone: got %v, want ErrNotRunning", err)
	}
	if !alive(shell) {
		t.Errorf("decoy group leader with the shell's old PID %d: got killed, want alive", shell)
	}
	return true
}

// warmThreads makes the runtime start n threads and leaves them idle, so
// that it need not create one (and take a PID) soon after.
func warmThreads(n int) {
	var locked sync.WaitGroup
	release := make(chan struct{})
	var done sync.WaitGroup
	for range n {
		locked.Add(1)
		done.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			locked.Done()
			<-release
		})
	}
	locked.Wait()
	close(release)
	done.Wait()
}

// startGroupWithPID starts `sleep 1000` as PID pid, which must be free, in
// a session and process group of its own (as kill(-pgid) would reach), and
// kills it at the end. A shell sets the namespace's last PID just below pid
// and forks at once: a thread this process creates in between would take
// the PID first, and the window is far shorter than a write here followed
// by os/exec's fork. It returns the PID it got, which the caller checks.
func startGroupWithPID(t *testing.T, pid int) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", `echo $1 > /proc/sys/kernel/ns_last_pid; setsid sleep 1000 & echo $!; wait`, "sh", strconv.Itoa(pid-1))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	got, _ := strconv.Atoi(strings.TrimSpace(line))
	t.Cleanup(func() {
		if got > 0 {
			_ = syscall.Kill(got, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if err != nil || got <= 0 {
		t.Fatalf("start a process with PID %d: %v", pid, err)
	}
	return got
}

// Row 8: Close during a detached process's Stop grace period does not
// leave Stop waiting forever: Stop returns with the exit once the grace
// period ends, Close returns, and Info no longer says Running.
func TestDetachCloseDuringStop(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	ctx := testContext(t)
	// One running process at most: the Starts that probe for Close below
	// are refused (ErrTooManyProcesses, then ErrClosed) and never spawn.
	m := agentproc.New(agentproc.WithStateDir(t.TempDir()), agentproc.WithClock(clk), agentproc.WithGracePeriod(time.Minute),
		agentproc.WithMaxRunning(1))
	p := mustStart(t, m, agentproc.Request{Command: `trap '' TERM; echo trapped; exec sleep 1000`, Detach: true})
	if _, err := p.WaitMatch(ctx, regexp.MustCompile(`^trapped$`)); err != nil {
		t.Fatal(err)
	}
	trap := clk.Trap().NewTimer("agentproc", "grace")
	defer trap.Close()
	type result struct {
		info agentproc.Info
		err  error
	}
	stopped := make(chan result, 1)
	go func() {
		info, err := p.Stop(ctx)
		stopped <- result{info, err}
	}()
	trap.MustWait(ctx).MustRelease(ctx)
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	// Close has begun once Start is refused as closed.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		_, err := m.Start(ctx, agentproc.Request{Command: "true"})
		if errors.Is(err, agentproc.ErrClosed) {
			break
		}
		if !errors.Is(err, agentproc.ErrTooManyProcesses) {
			t.Fatalf("Start while the detached process runs: got %v, want ErrTooManyProcesses or ErrClosed", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("Close never refused a Start")
		case <-tick.C:
		}
	}
	clk.Advance(time.Minute).MustWait(ctx)
	select {
	case r := <-stopped:
		if r.err != nil || r.info.Running {
			t.Errorf("Stop: got %+v, %v, want the exit", r.info, r.err)
		}
	case <-ctx.Done():
		t.Fatal("Stop did not return after the grace period ended during Close")
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	if info := p.Info(); info.Running {
		t.Errorf("Info after Stop and Close: got %+v, want exited", info)
	}
}

// Row 9: after a restart, a retried keyed Start attaches to the adopted
// detached process instead of running the command again; another request
// under the same key is a conflict.
func TestDetachKeyAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	req := agentproc.Request{Command: "exec sleep 1000", Key: "once", Detach: true, Env: map[string]string{"A": "1"}}
	m1 := agentproc.New(agentproc.WithStateDir(dir))
	p := mustStart(t, m1, req)
	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newManager(t, agentproc.WithStateDir(dir))
	if _, err := m2.Recovered(testContext(t)); err != nil {
		t.Fatal(err)
	}
	q, err := m2.Start(t.Context(), req)
	if err != nil || q.ID() != p.ID() {
		t.Fatalf("retried keyed Start after a restart: got %v, %v, want the adopted process %s", q, err, p.ID())
	}
	stopAtEnd(t, q)
	other := req
	other.Env = map[string]string{"A": "2"}
	if _, err := m2.Start(t.Context(), other); !errors.Is(err, agentproc.ErrKeyConflict) {
		t.Errorf("another request under the key: got %v, want ErrKeyConflict", err)
	}
	if n := len(m2.List()); n != 1 {
		t.Errorf("List: got %d processes, want the adopted one only", n)
	}
}

// Row 10: when a detached process's runner is SIGKILLed, its tree is swept
// before the exit is published: a process reported exited has nothing left
// running.
func TestDetachRunnerKilled(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithStateDir(t.TempDir()))
	ctx := testContext(t)
	p := mustStart(t, m, agentproc.Request{Command: `sleep 1000 & echo "child $!"; wait`, Detach: true})
	stopAtEnd(t, p)
	line, err := p.WaitMatch(ctx, regexp.MustCompile(`^child \d+$`))
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.Fields(line)[1])
	shell := p.Info().PID
	fds := pinPIDs(t, []int{shell, child})
	runner, err := os.FindProcess(ppidOf(t, shell))
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	info, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if left := waitExited(fds, 0); left != 0 {
		t.Errorf("%d of the tree's processes alive when the exit was published, want 0", left)
	}
	if info.Reason != agentproc.ReasonOrphaned || info.Leftovers != 2 {
		t.Errorf("exit: got reason %q leftovers %d, want %q and 2", info.Reason, info.Leftovers, agentproc.ReasonOrphaned)
	}
}

// Row 11: a detached process gets the oom_score_adj raise like any other.
func TestDetachOOMScoreRaised(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	want := min(host+agentproc.DefaultOOMScoreDelta, 1000)
	if want <= host {
		t.Skipf("this process's oom_score_adj is %d already: nothing to raise", host)
	}
	m := newManager(t, agentproc.WithStateDir(t.TempDir()))
	p := mustStart(t, m, agentproc.Request{Command: `echo "shell=$(cat /proc/$$/oom_score_adj)"; cat /proc/self/oom_score_adj`, Detach: true})
	mustWait(t, p)
	if got, wantOut := p.Output().Text, fmt.Sprintf("shell=%d\n%d\n", want, want); got != wantOut {
		t.Errorf("output: got %q, want %q", got, wantOut)
	}
}

// Row 13: a frozen state-dir file system does not block Close beyond the
// bound: the removal of a record retention dropped hangs, and Close still
// returns.
func TestStateDirFrozen(t *testing.T) {
	t.Parallel()
	mnt, freeze := freezableMount(t)
	const bound = time.Second
	const slack = 3 * time.Second
	clk := quartz.NewMock(t)
	m := agentproc.New(agentproc.WithClock(clk), agentproc.WithRetention(time.Minute, 256),
		agentproc.WithStateDir(filepath.Join(mnt, "state")), agentproc.WithLogDirBound(bound))
	t.Cleanup(func() { _ = m.Close() }) // after the thaw
	p := mustStart(t, m, agentproc.Request{Command: "echo done"})
	mustWait(t, p)
	freeze()
	clk.Advance(time.Minute)
	within(t, slack, "List", func() { _ = m.List() }) // drops p: its record's removal hangs
	if d := within(t, bound+slack, "Close", func() { _ = m.Close() }); d > bound+slack {
		t.Errorf("Close took %v, want at most %v", d, bound+slack)
	}
}

// procExists reports whether /proc lists pid, a zombie included.
func procExists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
