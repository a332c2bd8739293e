package agentproc

import (
	"context"
	"os"
	"regexp"
	"sync"

	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/pattern"
)

// ReadyCheck says when a process counts as ready (Request.Ready). With
// Match empty, the process is ready when its tree listens on Port (0: on any
// port; see Process.Ports). With Match set, it is ready when a line of its
// output, rendered by PlainText, matches the regular expression; a non-zero
// Port then also counts, whichever comes first. An invalid Match, one that
// compiles to more than 1,000 instructions (the host matches it against
// every line for the process's life, at the program's size times the
// line's length), or a Port outside 0-65535 is ErrInvalidRequest, and a check that needs ports on a
// platform without Process.Ports is ErrUnsupported: Start fails and starts
// nothing.
//
// Its JSON tags are part of httpapi's wire format, which embeds it; they are
// kept stable (TestWireTags).
type ReadyCheck struct {
	Port  int    `json:"port,omitempty"`
	Match string `json:"match,omitempty"`
}

// validate checks r; ports is Manager.portsAvailable.
func (r *ReadyCheck) validate(ports func() error) error {
	if r == nil {
		return nil
	}
	if r.Port < 0 || r.Port > 65535 {
		return xerrors.Errorf("ready port %d: %w", r.Port, ErrInvalidRequest)
	}
	if r.Match != "" {
		re, err := regexp.Compile(r.Match)
		if err != nil {
			return xerrors.Errorf("ready match %q: %v: %w", r.Match, err, ErrInvalidRequest)
		}
		// A client's pattern (httpapi's ready.match) ran for the whole
		// life of the process, each line costing the host up to a few
		// seconds (fourteenth attack review, TestAttackReadyMatchCostsHostCPU).
		if err := pattern.Check(re); err != nil {
			return xerrors.Errorf("ready match: %v: %w", err, ErrInvalidRequest)
		}
	}
	if r.Match == "" || r.Port != 0 {
		if err := ports(); err != nil {
			return err
		}
	}
	return nil
}

// observe starts what watches a new process beyond its supervisor: the port
// watcher for Background processes, the readiness check, and the input
// watcher for processes with a writable stdin. inID identifies the stdin
// the child reads (zero without one). The caller holds a count in m.wg for
// p's supervisor, so adding the readiness goroutines to it is safe.
//
// out is the output pipe (or terminal master) the reader copies from.
func (m *Manager) observe(p *Process, req Request, inID fileID, out *os.File) {
	if req.Background && m.portsAvailable() == nil {
		m.ports.watchBackground(p)
	}
	// Input detection reads /proc/PID/task: under a /proc of another PID
	// namespace that names other processes.
	if p.in != nil && !m.cfg.foreignProc {
		m.input.watch(p, inID, out, m.cfg.inputQuiet)
	}
	if req.Ready != nil {
		p.checkReady(*req.Ready)
	}
}

// checkReady runs the readiness check in goroutines counted in m.wg; they
// end when it passes or the process exits, and then close the supervisor's readyDone.
func (p *Process) checkReady(r ReadyCheck) {
	p.sup.readyDone = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	var wg sync.WaitGroup
	ready := func(e Event) {
		once.Do(func() {
			cancel()
			p.state.setReady()
			e.Type = EventReady
			p.emit(e)
		})
	}
	if r.Match == "" || r.Port != 0 {
		wg.Add(1)
		p.m.wg.Add(1)
		go func() {
			defer p.m.wg.Done()
			defer wg.Done()
			if pt, err := p.WaitPort(ctx, r.Port); err == nil {
				ready(Event{Port: &pt})
			}
		}()
	}
	if r.Match != "" {
		re := regexp.MustCompile(r.Match) // validated by Start
		wg.Add(1)
		p.m.wg.Add(1)
		go func() {
			defer p.m.wg.Done()
			defer wg.Done()
			if line, err := p.WaitMatch(ctx, re, Plain); err == nil {
				ready(Event{Line: line})
			}
		}()
	}
	p.m.wg.Add(1)
	go func() {
		defer p.m.wg.Done()
		wg.Wait()
		cancel()
		close(p.sup.readyDone)
	}()
}
