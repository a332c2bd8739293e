package agentproc

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Scope is a view of a Manager restricted to one owner: it starts processes
// stamped with that owner and never sees, gets, lists or signals another
// owner's process. Asking a Scope for another owner's process returns
// ErrNotFound, exactly as for an ID that never existed. Scopes are cheap;
// make one per request if convenient.
type Scope struct {
	m     *Manager
	owner string
}

// Scope returns the view of processes owned by owner. Scope("") sees only the
// processes started through Manager.Start, which have no owner.
func (m *Manager) Scope(owner string) *Scope {
	return &Scope{m: m, owner: owner}
}

// Owner returns the owner this Scope is restricted to.
func (s *Scope) Owner() string { return s.owner }

// DefaultSandbox returns a copy of the Manager's default sandbox, nil
// without one (Manager.DefaultSandbox): what a tool that lets its client
// choose the work dir holds that dir within when the request names no
// policy of its own.
func (s *Scope) DefaultSandbox() *Sandbox { return s.m.DefaultSandbox() }

// Start starts req stamped with the Scope's owner. See Manager.Start.
func (s *Scope) Start(ctx context.Context, req Request) (*Process, error) {
	p, _, err := s.m.startAttach(ctx, req, s.owner)
	return p, err
}

// StartOrAttach is Start that also says what it did: attached is true when
// req.Key named a retained process of the owner, started with the same
// request, which is returned and nothing is started; it is false when the
// returned process was started by this call. A server uses it to answer a
// retried start honestly. Without a Key it is always false.
// ctx is used as in Manager.Start.
func (s *Scope) StartOrAttach(ctx context.Context, req Request) (p *Process, attached bool, err error) {
	return s.m.startAttach(ctx, req, s.owner)
}

// Get returns the owner's process with the given ID, or ErrNotFound.
func (s *Scope) Get(id string) (*Process, error) {
	return s.m.get(id, s.visible)
}

// List returns the owner's processes in Manager.List order.
func (s *Scope) List() []Info {
	return s.m.list(s.visible)
}

// Remove forgets the owner's exited process with the given ID. See
// Manager.Remove; another owner's process is ErrNotFound.
func (s *Scope) Remove(id string) error {
	return s.m.remove(id, s.visible)
}

func (s *Scope) visible(p *Process) bool {
	return p.owner == s.owner
}

// StopAll stops every running process of the Scope's owner, all at once as
// Close does (terminate, one grace period for all of them, kill), and
// returns their final Infos, newest first. Processes of other owners are
// not touched. If ctx ends first, every remaining tree is killed at once
// and StopAll returns the Infos as they are, with ctx.Err(). Processes
// started while StopAll runs are not stopped.
func (s *Scope) StopAll(ctx context.Context) ([]Info, error) {
	m := s.m
	m.mu.Lock()
	var running []*Process
	for _, p := range m.procs {
		if s.visible(p) && !p.exited() {
			running = append(running, p)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(running, func(a, b *Process) int { return cmp.Compare(b.seq, a.seq) })

	infos := make([]Info, len(running))
	errs := make([]error, len(running))
	// As in Close, one pass over /proc, taken before any signal, serves
	// every terminate step.
	since := time.Now()
	if len(running) > 0 {
		prepareStops(&m.cfg, since)
	}
	var wg sync.WaitGroup
	for i, p := range running {
		wg.Go(func() { infos[i], errs[i] = p.sup.stop(ctx, ReasonKilled, since) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return infos, err
		}
	}
	return infos, nil
}
