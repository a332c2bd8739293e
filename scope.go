package agentproc

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

// Start starts req stamped with the Scope's owner. See Manager.Start.
func (s *Scope) Start(req Request) (*Process, error) {
	return s.m.start(req, s.owner)
}

// StartOrAttach is Start that also says what it did: attached is true when
// req.Key named a retained process of the owner, started with the same
// request, which is returned and nothing is started; it is false when the
// returned process was started by this call. A server uses it to answer a
// retried start honestly. Without a Key it is always false.
func (s *Scope) StartOrAttach(req Request) (p *Process, attached bool, err error) {
	p, err = s.m.startAttach(req, s.owner, &attached)
	return p, attached, err
}

// Get returns the owner's process with the given ID, or ErrNotFound.
func (s *Scope) Get(id string) (*Process, error) {
	return s.m.get(id, s.visible)
}

// List returns the owner's processes in Manager.List order.
func (s *Scope) List() []Info {
	return s.m.list(s.visible)
}

func (s *Scope) visible(p *Process) bool {
	return p.owner == s.owner
}
