package agentproc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// The tests of Request.Detach (detach_linux.go). A detached process's
// record and recovery go through the state dir; the hosts and helpers they
// share with its tests are in statedir_linux_test.go.

func init() {
	agentproc.RegisterHelper("host-detach", func() int { return runDetachHost(os.Getenv(hostDirEnv)) }, false)
}

// fifoServer is a command that prints "got X" for each line X written to
// the FIFO at path. Opening it read-write keeps it from blocking on open
// and from seeing EOF between writers.
func fifoServer(path string) string {
	return `exec 3<>` + path + `; while read -r x <&3; do echo "got $x"; done`
}

// exitOnFIFO is a command that exits with code once a line arrives on the
// FIFO at path.
func exitOnFIFO(path string, code int) string {
	return fmt.Sprintf(`exec 3<>%s; read -r x <&3; echo "bye $x"; exit %d`, path, code)
}

// runDetachHost starts a detached server on the first FIFO and a detached
// command that exits 3 on the second, waits until the server answered the
// request the test sent before starting it ("1"), prints both IDs and
// "ready", and blocks until killed.
func runDetachHost(dir string) int {
	fifos := strings.Fields(os.Getenv(hostFIFOEnv))
	m := agentproc.New(agentproc.WithStateDir(dir))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	server, err := m.Start(ctx, agentproc.Request{Command: fifoServer(fifos[0]), Detach: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "host: start:", err)
		return 1
	}
	exiter, err := m.Start(ctx, agentproc.Request{Command: exitOnFIFO(fifos[1], 3), Detach: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "host: start:", err)
		return 1
	}
	if _, err := server.WaitMatch(ctx, regexp.MustCompile(`^got 1$`)); err != nil {
		fmt.Fprintln(os.Stderr, "host: wait for the server:", err)
		return 1
	}
	fmt.Printf("pids %d %d %s\n", server.Info().PID, exiter.Info().PID, server.ID())
	fmt.Printf("pids %d %d %s\n", server.Info().PID, exiter.Info().PID, exiter.ID())
	fmt.Println("ready")
	select {}
}

func makeFIFOs(t *testing.T, n int) []string {
	t.Helper()
	dir := t.TempDir()
	paths := make([]string, n)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("fifo%d", i))
		if err := unix.Mkfifo(paths[i], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// writeFIFO writes one line to a FIFO whose reader has it open.
func writeFIFO(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

// TestDetachSurvivesHostDeath: a host starts a detached server and a
// detached command and is SIGKILLed; both keep running, and a new Manager
// adopts them: the server's output from before and after the host's death
// is readable by offset, WaitMatch finds a later line, Stop ends it with
// the usual reason, and the other's Wait returns its exit code.
func TestDetachSurvivesHostDeath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifos := makeFIFOs(t, 2)
	// The server answers this once it runs; the host waits for the answer.
	go func() {
		f, err := os.OpenFile(fifos[0], os.O_WRONLY, 0) // blocks until the server opens it
		if err == nil {
			_, _ = f.WriteString("1\n")
			_ = f.Close()
		}
	}()
	host, pids, ids := startHost(t, agentproc.UseHelper("host-detach"), hostDirEnv+"="+dir, hostFIFOEnv+"="+strings.Join(fifos, " "))
	fds := pinPIDs(t, pids[:2])
	if err := host.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	// The host is reaped, so its guard has seen EOF; a detached tree is
	// not the guard's to kill.
	writeFIFO(t, fifos[0], "2")

	m := newManager(t, agentproc.WithStateDir(dir), agentproc.WithGracePeriod(2*time.Second))
	infos, err := m.Recovered(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Fatalf("Recovered: got %+v, want the 2 detached processes", infos)
	}
	for _, info := range infos {
		if !info.Running || !info.Detached {
			t.Errorf("adopted %s: got running=%v detached=%v, want both", info.ID, info.Running, info.Detached)
		}
	}
	server, err := m.Get(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	if _, err := server.WaitMatch(ctx, regexp.MustCompile(`^got 2$`)); err != nil {
		t.Fatalf("WaitMatch for the line written after the host died: %v", err)
	}
	writeFIFO(t, fifos[0], "3")
	if _, err := server.WaitMatch(ctx, regexp.MustCompile(`^got 3$`)); err != nil {
		t.Fatalf("WaitMatch for a line written after adoption: %v", err)
	}
	c, err := server.Read(0)
	if err != nil || c.Offset != 0 || !strings.HasPrefix(c.Data, "got 1\ngot 2\ngot 3\n") {
		t.Errorf("Read(0): got %+v, %v, want the output from before and after the host's death", c, err)
	}
	if c2, err := server.Read(int64(len("got 1\n"))); err != nil || !strings.HasPrefix(c2.Data, "got 2\n") {
		t.Errorf("Read(6): got %+v, %v, want it to start at the second line", c2, err)
	}
	info, err := server.Stop(ctx)
	if err != nil || info.Running || info.Reason != agentproc.ReasonKilled {
		t.Errorf("Stop: got %+v, %v, want exited with %q", info, err, agentproc.ReasonKilled)
	}
	if waitExited(fds[:1], testTimeout) != 0 {
		t.Error("the server is alive after Stop")
	}

	exiter, err := m.Get(ids[1])
	if err != nil {
		t.Fatal(err)
	}
	writeFIFO(t, fifos[1], "x")
	info = mustWait(t, exiter)
	if exitCode(info) != 3 || info.Reason != agentproc.ReasonExited {
		t.Errorf("Wait: got code %d reason %q, want 3 %q", exitCode(info), info.Reason, agentproc.ReasonExited)
	}
	if got := exiter.Output().Text; got != "bye x\n" {
		t.Errorf("output: got %q, want %q", got, "bye x\n")
	}
}

// TestDetachGracefulRestart: Close leaves a detached process running and
// stops the rest; the next Manager on the dir adopts the detached one.
func TestDetachGracefulRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifos := makeFIFOs(t, 2)
	fifo := fifos[0]
	m1 := agentproc.New(agentproc.WithStateDir(dir), agentproc.WithGracePeriod(time.Second))
	det := mustStart(t, m1, agentproc.Request{Command: exitOnFIFO(fifo, 5), Detach: true})
	server := mustStart(t, m1, agentproc.Request{Command: fifoServer(fifos[1]), Detach: true})
	tied := mustStart(t, m1, agentproc.Request{Command: "sleep 300"})
	if !det.Info().Detached || tied.Info().Detached {
		t.Fatalf("Info.Detached: got %v and %v, want true and false", det.Info().Detached, tied.Info().Detached)
	}
	fd := pinPIDs(t, []int{det.Info().PID})[0]
	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}
	if info := tied.Info(); info.Running || info.Reason != agentproc.ReasonShutdown {
		t.Errorf("tied process after Close: got %+v, want stopped with %q", info, agentproc.ReasonShutdown)
	}
	if !pidfdAlive(t, fd) {
		t.Fatal("Close stopped the detached process")
	}

	m2 := newManager(t, agentproc.WithStateDir(dir))
	infos, err := m2.Recovered(testContext(t))
	if err != nil || len(infos) != 2 || !infos[0].Running || !infos[1].Running {
		t.Fatalf("Recovered: got %+v, %v, want the 2 detached processes running", infos, err)
	}
	// Signal reaches an adopted process's group.
	s2, err := m2.Get(server.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Signal(agentproc.SignalKill); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	if info := mustWait(t, s2); info.Reason != agentproc.ReasonKilled || info.ExitSignal != "SIGKILL" {
		t.Errorf("after Signal(kill): got reason %q signal %q, want %q SIGKILL", info.Reason, info.ExitSignal, agentproc.ReasonKilled)
	}
	if err := s2.Signal(agentproc.SignalKill); !errors.Is(err, agentproc.ErrNotRunning) {
		t.Errorf("Signal after exit: got %v, want ErrNotRunning", err)
	}
	p, err := m2.Get(det.ID())
	if err != nil {
		t.Fatal(err)
	}
	writeFIFO(t, fifo, "now")
	info := mustWait(t, p)
	if exitCode(info) != 5 || p.Output().Text != "bye now\n" {
		t.Errorf("adopted process: got code %d output %q, want 5 %q", exitCode(info), p.Output().Text, "bye now\n")
	}
}

func TestDetachInvalid(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	if _, err := m.Start(t.Context(), agentproc.Request{Command: "true", Detach: true}); !errors.Is(err, agentproc.ErrInvalidRequest) {
		t.Errorf("Detach without a state dir: got %v, want ErrInvalidRequest", err)
	}
	ms := newManager(t, agentproc.WithStateDir(t.TempDir()))
	for _, req := range []agentproc.Request{
		{Command: "true", Detach: true, Stdin: true},
		{Command: "true", Detach: true, Timeout: time.Second},
		{Command: "true", Detach: true, IdleTimeout: time.Second},
		{Command: "true", Detach: true, MaxOutput: 1},
	} {
		if _, err := ms.Start(t.Context(), req); !errors.Is(err, agentproc.ErrInvalidRequest) {
			t.Errorf("Start(%+v): got %v, want ErrInvalidRequest", req, err)
		}
	}
	limited := newManager(t, agentproc.WithStateDir(t.TempDir()), agentproc.WithLimits(agentproc.Limits{Procs: 64}))
	if _, err := limited.Start(t.Context(), agentproc.Request{Command: "true", Detach: true}); !errors.Is(err, agentproc.ErrUnsupported) {
		t.Errorf("Detach under WithLimits: got %v, want ErrUnsupported", err)
	}
}

// TestDetachLongOutput: a detached process printing far more than its cap
// keeps the head and the end of its output on disk; the Manager following
// it, and a Manager adopting it after it exited with no Manager around,
// both show the start and the last line with exact byte counts.
func TestDetachLongOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A 64 KiB cap: 16 KiB segments, two for the head, the last two for
	// the tail. seq 1 200000 prints 1288895 bytes.
	const total = 1288895
	limit := agentproc.WithOutputLog("", 64<<10)
	check := func(who string, out agentproc.Output) {
		t.Helper()
		if !strings.HasPrefix(out.Text, "1\n2\n3\n") || !strings.HasSuffix(out.Text, "\n199999\n200000\n") {
			t.Errorf("%s: output got %q...%q, want the start and the end", who,
				out.Text[:min(20, len(out.Text))], out.Text[max(0, len(out.Text)-20):])
		}
		if out.Truncated == nil || out.Truncated.OriginalBytes != total {
			t.Errorf("%s: Truncated got %+v, want %d original bytes", who, out.Truncated, total)
		}
	}

	m1 := agentproc.New(agentproc.WithStateDir(dir), limit)
	p := mustStart(t, m1, agentproc.Request{Command: "seq 1 200000", Detach: true})
	if info := mustWait(t, p); exitCode(info) != 0 {
		t.Fatalf("exit code: got %d, want 0", exitCode(info))
	}
	check("follower", p.Output())
	if segs, _ := filepath.Glob(filepath.Join(dir, "out", p.ID(), "seg-*")); len(segs) > 4 {
		t.Errorf("segment files: got %d, want at most 4 (head and rolling tail)", len(segs))
	}

	fifo := makeFIFOs(t, 1)[0]
	q := mustStart(t, m1, agentproc.Request{Command: "exec 3<>" + fifo + "; read -r x <&3; seq 1 200000", Detach: true})
	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}
	// The runner's identity is in the record; its exit (after it wrote
	// the status) is the event to wait for.
	rec := findRecord(t, dir, q.ID())
	if rec == nil {
		t.Fatalf("no record of %s after Close", q.ID())
	}
	runner := int(rec["runner"].(map[string]any)["pid"].(float64))
	runnerFD := pinPIDs(t, []int{runner})
	writeFIFO(t, fifo, "go")
	if waitExited(runnerFD, testTimeout) != 0 {
		t.Fatal("the runner did not exit")
	}

	m2 := newManager(t, agentproc.WithStateDir(dir), limit)
	infos, err := m2.Recovered(testContext(t))
	if err != nil || len(infos) != 1 || infos[0].Running || exitCode(infos[0]) != 0 || infos[0].Reason != agentproc.ReasonExited {
		t.Fatalf("Recovered: got %+v, %v, want %s exited 0", infos, err, q.ID())
	}
	adopted, err := m2.Get(q.ID())
	if err != nil {
		t.Fatal(err)
	}
	check("adopter", adopted.Output())
}

// TestDetachRetention: retention drops an exited detached process with its
// record and output files.
func TestDetachRetention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newManager(t, agentproc.WithRetention(0, 0), agentproc.WithStateDir(dir))
	p := mustStart(t, m, agentproc.Request{Command: "echo hi", Detach: true})
	mustWait(t, p)
	if _, err := m.Get(p.ID()); !errors.Is(err, agentproc.ErrNotFound) {
		t.Fatalf("Get after retention: got %v, want ErrNotFound", err)
	}
	agentproc.WaitStateIdle(m)
	if rec := findRecord(t, dir, p.ID()); rec != nil {
		t.Errorf("record after retention: got %v, want it removed", rec)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", p.ID())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output files after retention: got %v, want them removed", err)
	}
}

// TestDetachKey: a retried Start with the same Key but another Detach is a
// conflict, never the process of the other kind.
func TestDetachKey(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithStateDir(t.TempDir()))
	p := mustStart(t, m, agentproc.Request{Command: "echo hi", Key: "k", Detach: true})
	if q, err := m.Start(t.Context(), agentproc.Request{Command: "echo hi", Key: "k", Detach: true}); err != nil || q.ID() != p.ID() {
		t.Errorf("same keyed request: got %v, %v, want process %s", q, err, p.ID())
	}
	if _, err := m.Start(t.Context(), agentproc.Request{Command: "echo hi", Key: "k"}); !errors.Is(err, agentproc.ErrKeyConflict) {
		t.Errorf("same key without Detach: got %v, want ErrKeyConflict", err)
	}
	mustWait(t, p)
}

// TestDetachEvents: a detached process publishes started and exited like
// any other, and so does one adopted by a new Manager.
func TestDetachEvents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := testContext(t)
	fifo := makeFIFOs(t, 1)[0]
	m1 := agentproc.New(agentproc.WithStateDir(dir))
	events := m1.Subscribe(ctx)
	p := mustStart(t, m1, agentproc.Request{Command: exitOnFIFO(fifo, 2), Detach: true})
	next := func(ch <-chan agentproc.Event, want agentproc.EventType) agentproc.Event {
		t.Helper()
		for {
			select {
			case e := <-ch:
				if e.ID == p.ID() && e.Type == want {
					return e
				}
			case <-ctx.Done():
				t.Fatalf("no %s event for %s", want, p.ID())
			}
		}
	}
	next(events, agentproc.EventStarted)
	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newManager(t, agentproc.WithStateDir(dir))
	events2 := m2.Subscribe(ctx)
	if _, err := m2.Recovered(ctx); err != nil {
		t.Fatal(err)
	}
	writeFIFO(t, fifo, "x")
	if e := next(events2, agentproc.EventExited); e.Info == nil || exitCode(*e.Info) != 2 {
		t.Errorf("exited event: got %+v, want exit code 2", e)
	}
}

// TestDetachEscapeeSweptAtExit: a detached process whose shell exits by
// itself, leaving a setsid escapee that holds the output pipe, is reported
// exited only once the escapee is killed and counted in Leftovers. The
// runner kills only the shell's group and gives up on the pipe after its
// drain; before, the exit was published with the escapee running on, and
// a Stop after it (not running) left it there.
// startEscapee starts under m a detached shell that leaves a setsid
// escapee (sleep) holding the output pipe and exits once fifo is written.
// It returns when the escapee runs sleep (its own session, out of reach
// of the runner's kill of the shell's group), with a pidfd pinning it;
// the escapee is killed at cleanup.
func startEscapee(t *testing.T, m *agentproc.Manager) (p *agentproc.Process, fifo string, escapee, fd int) {
	t.Helper()
	fifo = makeFIFOs(t, 1)[0]
	p = mustStart(t, m, agentproc.Request{
		Command: `exec 3<>` + fifo + `; setsid sleep 60 & echo $!; read -r x <&3; exit 0`,
		Detach:  true,
	})
	ctx := testContext(t)
	line, err := p.WaitMatch(ctx, regexp.MustCompile(`^[0-9]+$`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscan(line, &escapee); err != nil {
		t.Fatal(err)
	}
	fd = pinPIDs(t, []int{escapee})[0]
	t.Cleanup(func() { _ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) })
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		cmdline, _ := agentproc.ProcFile(escapee, "cmdline")
		if strings.HasPrefix(string(cmdline), "sleep\x00") {
			return p, fifo, escapee, fd
		}
		select {
		case <-ctx.Done():
			t.Fatalf("escapee %d: got cmdline %q, want sleep", escapee, cmdline)
		case <-tick.C:
		}
	}
}

func TestDetachEscapeeSweptAtExit(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithStateDir(t.TempDir()))
	p, fifo, escapee, fd := startEscapee(t, m)
	writeFIFO(t, fifo, "go")
	info := mustWait(t, p)
	if pidfdAlive(t, fd) {
		t.Errorf("escapee %d after the exit was published: got running, want killed", escapee)
	}
	if info.Leftovers != 1 {
		t.Errorf("Leftovers got %d, want 1", info.Leftovers)
	}
}

// TestDetachEscapeeSweptAtAdoption: the same, when the runner exits while
// no Manager follows the process (after Close): the next Manager on the dir
// kills the escapee before it lists the process as exited.
func TestDetachEscapeeSweptAtAdoption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := agentproc.New(agentproc.WithStateDir(dir))
	p, fifo, escapee, fd := startEscapee(t, m)
	runner := pinPIDs(t, []int{ppidOf(t, p.Info().PID)})[0]
	ctx := testContext(t)
	if err := m.Close(); err != nil {
		t.Fatalf("Close: got %v, want nil", err)
	}
	writeFIFO(t, fifo, "go")
	if waitExited([]int{runner}, testTimeout) != 0 {
		t.Fatal("the runner did not exit")
	}
	m2 := newManager(t, agentproc.WithStateDir(dir))
	if _, err := m2.Recovered(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := m2.Get(p.ID())
	if err != nil {
		t.Fatal(err)
	}
	info := mustWait(t, q)
	if pidfdAlive(t, fd) {
		t.Errorf("escapee %d after adoption of the exited process: got running, want killed", escapee)
	}
	if info.Leftovers != 1 {
		t.Errorf("Leftovers got %d, want 1", info.Leftovers)
	}
}
