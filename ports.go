package agentproc

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/xerrors"
)

// Port is a socket a process of a tree listens on: a TCP socket in LISTEN
// state, or a bound UDP socket that is not connected to a peer.
//
// Its JSON tags are part of httpapi's wire format, which embeds it; they are
// kept stable (TestWireTags).
type Port struct {
	// Network is "tcp", "tcp6", "udp" or "udp6". A socket bound to an IPv6
	// address that also accepts IPv4 ([::]) is "tcp6" or "udp6".
	Network string `json:"network"`
	// Addr is the local address it is bound to: "0.0.0.0" or "::" for all
	// interfaces, "127.0.0.1" for the loopback only.
	Addr string `json:"addr"`
	Port int    `json:"port"`
	// PID is a process of the tree holding the socket (the lowest PID when
	// several share it).
	PID int `json:"pid"`
}

// How often the port watcher scans. There is no kernel event for listen(),
// so it polls: portPollMin after something new is watched (a WaitPort
// call, a background start), doubling up to portPollMax while nothing
// changes. One watcher per Manager scans every watched process in one pass.
const (
	portPollMin = 10 * time.Millisecond
	portPollMax = time.Second
)

// Ports scans the process's tree now and returns the sockets it listens
// on, sorted by port: those held by the shell and its descendants, by
// processes that carry its MarkerEnv marker (descendants that double-forked
// away, even into a session of their own), and with WithCgroup by members
// of its cgroup. A socket held only by a process outside the tree never
// counts, even on the same port. It returns nil once the process has
// exited.
//
// On Linux the sockets are the TCP and UDP tables of /proc/net matched, by
// inode, against the /proc/PID/fd links of the tree's processes; sockets in
// a network namespace other than this process's are not seen. On Windows
// they are the rows of the TCP listener and UDP tables
// (GetExtendedTcpTable, GetExtendedUdpTable) whose owning process is in
// the tree's Job Object; where the tables name no owners (Wine 8) the
// result is ErrUnsupported rather than a guess. macOS and FreeBSD return
// ErrUnsupported.
//
// The scan reads the OS's tables and the tree's descriptors, which a
// loaded host can make slow; when ctx ends first Ports returns ctx.Err()
// and the scan finishes on its own.
func (p *Process) Ports(ctx context.Context) ([]Port, error) {
	if err := p.m.portsAvailable(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.exited() {
		return nil, nil
	}
	type scan struct {
		ports [][]Port
		err   error
	}
	done := make(chan scan, 1)
	tree := p.portTree()
	go func() {
		res, err := listeningPorts(nil, []portTree{tree})
		done <- scan{res, err}
	}()
	var res [][]Port
	select {
	case s := <-done:
		if s.err != nil {
			return nil, s.err
		}
		res = s.ports
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return res[0], nil
}

// WaitPort blocks until the process's tree listens on port (see Ports for
// what counts), or on any port when port is 0, and returns that socket. It
// returns an error wrapping ErrExited if the process exits first, and
// ctx.Err() if ctx ends first. A port outside 0-65535 is ErrInvalidRequest.
//
// It polls (there is no kernel event for listen()): every 10 ms at first,
// backing off to once a second, with one scan per interval shared by every
// waiter of the Manager, so a hundred waiting processes cost one scan. On
// platforms without Ports it returns ErrUnsupported.
func (p *Process) WaitPort(ctx context.Context, port int) (Port, error) {
	if port < 0 || port > 65535 {
		return Port{}, xerrors.Errorf("port %d: %w", port, ErrInvalidRequest)
	}
	if err := p.m.portsAvailable(); err != nil {
		return Port{}, err
	}
	w := &portWaiter{port: port, found: make(chan portResult, 1)}
	if !p.m.ports.add(p, w) {
		return Port{}, xerrors.Errorf("wait for port of process %s: %w", p.id, ErrClosed)
	}
	defer p.m.ports.remove(p, w)
	select {
	case r := <-w.found:
		return r.port, r.err
	case <-p.Done():
		// A socket the last scan found is still an answer.
		select {
		case r := <-w.found:
			return r.port, r.err
		default:
		}
		return Port{}, xerrors.Errorf("process %s: no port %d: %w", p.id, port, ErrExited)
	case <-ctx.Done():
		return Port{}, ctx.Err()
	}
}

// portTree names what ports_*.go needs to find a tree's processes.
type portTree struct {
	leader int      // PID and process group ID of the shell
	id     string   // the MarkerEnv value
	cgroup string   // the cgroup directory, "" without WithCgroup
	sys    *sysProc // the OS layer's handle on the tree (the Job Object on Windows)
}

func (p *Process) portTree() portTree {
	if p.sup.cmd == nil && p.sup.rec != nil {
		// Detached: the runner's shell, found by its group and marker.
		return portTree{leader: p.sup.rec.Leader.PID, id: p.id}
	}
	return portTree{leader: p.sup.cmd.Process.Pid, id: p.id, cgroup: p.sup.ctr.cgroupDir(), sys: p.sup.sys}
}

// The per-OS port layer (ports_linux.go, ports_windows.go,
// ports_nonlinux.go: portsSupported, portCache, listeningPorts) is part of
// the contract in platform.go.

type portWaiter struct {
	port  int
	found chan portResult // capacity 1; written once
}

type portResult struct {
	port Port
	err  error
}

// portInterest is why the watcher scans one process.
type portInterest struct {
	waiters    []*portWaiter
	background bool // a Background process: Info.Ports is kept current
}

// portWatcher is a Manager's one poller of listening ports. It runs only
// while something is watched, and scans without holding its lock or any
// process's. Its zero value is ready to use.
type portWatcher struct {
	mu      sync.Mutex
	procs   map[*Process]*portInterest
	running bool
	closed  bool
	kick    chan struct{} // capacity 1: "scan soon"
	cache   portCache     // used by loop only
	wg      sync.WaitGroup
}

// add registers w for p and starts the poller if needed; false after close.
func (pw *portWatcher) add(p *Process, w *portWaiter) bool {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if pw.closed {
		return false
	}
	pw.interestLocked(p).waiters = append(pw.interestLocked(p).waiters, w)
	pw.startLocked()
	return true
}

// watchBackground keeps p's Info.Ports current until it exits.
func (pw *portWatcher) watchBackground(p *Process) {
	if portsSupported() != nil {
		return
	}
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if pw.closed {
		return
	}
	pw.interestLocked(p).background = true
	pw.startLocked()
}

func (pw *portWatcher) interestLocked(p *Process) *portInterest {
	if pw.procs == nil {
		pw.procs = make(map[*Process]*portInterest)
		pw.kick = make(chan struct{}, 1)
	}
	in := pw.procs[p]
	if in == nil {
		in = &portInterest{}
		pw.procs[p] = in
	}
	return in
}

// startLocked starts the poller, or makes a running one scan soon and go
// back to its shortest interval.
func (pw *portWatcher) startLocked() {
	if pw.running {
		pw.poke()
		return
	}
	pw.running = true
	pw.wg.Add(1)
	go pw.loop()
}

func (pw *portWatcher) poke() {
	select {
	case pw.kick <- struct{}{}:
	default:
	}
}

func (pw *portWatcher) remove(p *Process, w *portWaiter) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	in := pw.procs[p]
	if in == nil {
		return
	}
	in.waiters = slices.DeleteFunc(in.waiters, func(x *portWaiter) bool { return x == w })
	if len(in.waiters) == 0 && !in.background {
		delete(pw.procs, p)
		if len(pw.procs) == 0 {
			pw.poke() // let the poller end now rather than after its interval
		}
	}
}

// close stops the poller and waits for it. Waiters still registered end on
// their process's exit, which Close brings about.
func (pw *portWatcher) close() {
	pw.mu.Lock()
	pw.closed = true
	pw.procs = nil
	if pw.running {
		pw.poke()
	}
	pw.mu.Unlock()
	pw.wg.Wait()
}

func (pw *portWatcher) loop() {
	defer pw.wg.Done()
	interval := portPollMin
	for {
		pw.mu.Lock()
		for p := range pw.procs {
			if p.exited() {
				delete(pw.procs, p)
			}
		}
		if len(pw.procs) == 0 {
			pw.running = false
			pw.mu.Unlock()
			return
		}
		procs := make([]*Process, 0, len(pw.procs))
		for p := range pw.procs {
			procs = append(procs, p)
		}
		pw.mu.Unlock()

		trees := make([]portTree, len(procs))
		for i, p := range procs {
			trees[i] = p.portTree()
		}
		res, err := listeningPorts(&pw.cache, trees)
		for i, p := range procs {
			if err == nil {
				p.state.setPorts(res[i])
			}
		}

		pw.mu.Lock()
		for i, p := range procs {
			in := pw.procs[p]
			if in == nil {
				continue
			}
			in.waiters = slices.DeleteFunc(in.waiters, func(w *portWaiter) bool {
				if err != nil {
					w.found <- portResult{err: xerrors.Errorf(prefixFor(err)+"scan ports: %w", err)}
					return true
				}
				for _, pt := range res[i] {
					if w.port == 0 || pt.Port == w.port {
						w.found <- portResult{port: pt}
						return true
					}
				}
				return false
			})
		}
		pw.mu.Unlock()

		// Real time on purpose: it paces /proc reads, it is not a
		// duration a caller asked for.
		timer := time.NewTimer(interval)
		select {
		case <-timer.C:
			interval = min(2*interval, portPollMax)
		case <-pw.kick:
			interval = portPollMin
		}
		timer.Stop()
	}
}

// setPorts records the ports of the latest scan in Info.Ports, unless the
// process has exited meanwhile (an exited process listens on nothing).
func (st *handleState) setPorts(ports []Port) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.info.Running {
		st.info.Ports = ports
	}
}

// dedupePorts sorts ports and drops repeats of one socket address (the
// same socket listed twice, SO_REUSEPORT groups).
func dedupePorts(ports []Port) []Port {
	if len(ports) == 0 {
		return nil
	}
	slices.SortFunc(ports, comparePorts)
	return slices.CompactFunc(ports, func(a, b Port) bool {
		return a.Network == b.Network && a.Addr == b.Addr && a.Port == b.Port
	})
}

func comparePorts(a, b Port) int {
	switch {
	case a.Port != b.Port:
		return a.Port - b.Port
	case a.Network != b.Network:
		return strings.Compare(a.Network, b.Network)
	case a.Addr != b.Addr:
		return strings.Compare(a.Addr, b.Addr)
	}
	return a.PID - b.PID
}
