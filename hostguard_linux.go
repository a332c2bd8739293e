package agentproc

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/xerrors"
)

// hostGuardEnv makes a re-executed host binary run as the guard (see
// reexecRoles).
const hostGuardEnv = "AGENTPROC_GUARD"

// hostGuard is the host side of the guard process: a copy of the host binary
// (/proc/self/exe) that reads the list of the Manager's running trees from
// a pipe and, when the pipe reaches EOF, kills every tree still listed.
// The host holds the only write end (close-on-exec, so no child inherits
// it), so EOF comes exactly when the host has died or the Manager has
// closed; in the second case the list is empty. See docs/containment.md for
// why this beats a parent-death signal.
//
// Each message is one line shorter than PIPE_BUF, which the kernel writes
// atomically, so concurrent Starts need no lock around the pipe.
type hostGuard struct {
	w    *os.File
	cmd  *exec.Cmd
	once sync.Once
	warn func(error)
}

// hostGuardLineMax keeps every message below PIPE_BUF (4096 on Linux).
const hostGuardLineMax = 4000

func startHostGuard(warn func(error)) (*hostGuard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, xerrors.Errorf("agentproc: start guard: %w", err)
	}
	cmd := reexecCmd("agentproc-guard", hostGuardEnv, nil, os.Environ())
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, xerrors.Errorf("agentproc: start guard process: %w", err)
	}
	_ = r.Close()
	// Room for the messages of a burst of Starts while the guard batches.
	growPipe(w)
	return &hostGuard{w: w, cmd: cmd, warn: warn}, nil
}

// add lists (or updates) a running tree.
func (g *hostGuard) add(id string, leader hostIdentity, cgroup string) {
	line := "+\t" + id + "\t" + strconv.Itoa(leader.PID) + "\t" + strconv.FormatUint(leader.Start, 10) + "\t" + cgroup + "\n"
	if len(line) > hostGuardLineMax {
		// A path this long cannot be sent atomically; the marker and the
		// group still reach the tree.
		line = "+\t" + id + "\t" + strconv.Itoa(leader.PID) + "\t" + strconv.FormatUint(leader.Start, 10) + "\t\n"
	}
	g.send(line)
}

// remove unlists a tree that has exited.
func (g *hostGuard) remove(id string) { g.send("-\t" + id + "\n") }

func (g *hostGuard) send(line string) {
	if g == nil {
		return
	}
	if _, err := g.w.WriteString(line); err != nil {
		// The guard died (it was killed): trees then outlive a host crash,
		// which is worth one warning.
		g.once.Do(func() { g.warn(xerrors.Errorf("agentproc: guard process is gone: %w", err)) })
	}
}

// close ends the guard: EOF with an empty list makes it exit at once.
func (g *hostGuard) close() {
	if g == nil {
		return
	}
	_ = g.w.Close()
	_ = g.cmd.Wait()
}

// hostGuardBatch is how long the guard lets messages gather in the pipe
// after each read. Waking the guard for every start and exit is a
// measurable share of BenchmarkStateDir/StartWait; waking it at most once
// per batch is not (docs/measurements.md), and delays its reaction to the
// host's death by at most the batch.
const hostGuardBatch = 20 * time.Millisecond

// batchedReader pauses after every read that returned data, so that the
// next read takes everything written meanwhile in one go. EOF and errors
// return at once.
type batchedReader struct{ r io.Reader }

func (b batchedReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 && err == nil {
		time.Sleep(hostGuardBatch) // batching, not synchronisation
	}
	return n, err
}

// runHostGuard is the guard's main (see reexecRoles): it keeps the list until EOF, then stops
// every listed tree without a grace period (the host that would have given
// one is dead) and exits.
func runHostGuard(in *os.File) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGPIPE)
	trees := make(map[string]orphanTree)
	sc := bufio.NewScanner(batchedReader{in})
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		switch {
		case len(f) == 2 && f[0] == "-":
			delete(trees, f[1])
		case len(f) == 5 && f[0] == "+":
			t := orphanTree{id: f[1], cgroup: f[4], fromHost: true}
			t.leader.PID, _ = strconv.Atoi(f[2])
			t.leader.Start, _ = strconv.ParseUint(f[3], 10, 64)
			if t.leader.PID > 0 {
				t.leader.Boot = bootID()
			}
			trees[t.id] = t
		}
	}
	list := make([]orphanTree, 0, len(trees))
	for _, t := range trees {
		list = append(list, t)
	}
	stopOrphans(list, 0)
	return 0
}
