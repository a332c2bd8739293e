package agentproc

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/xerrors"
)

// Bounds on one owner's set of started requests' Env secrets (ownerSecrets).
const (
	// MaxOwnerSecrets is the most secret-looking Request.Env values one
	// owner's redaction set holds.
	MaxOwnerSecrets = 256
	// MaxOwnerSecretBytes bounds the total bytes of the values one owner's
	// redaction set holds: a secret costs the heap about 90 times its bytes
	// (its forms, their index and trie), so 64 KiB of them about 6 MiB.
	MaxOwnerSecretBytes = 64 << 10
)

// ownerSecrets holds, per owner (Process.owner; "" for Manager.Start),
// the started set of the secret-looking values of the Env of the
// requests that owner has started (Manager.holdOwnerSecrets). They are
// redacted in the output of that owner's processes only: redacting them
// in every owner's stream cost every owner's Start and stream for good
// and let another owner test guesses (sixth mend's open row). Each set is
// bounded (startedSecrets.hold). The zero value is ready.
type ownerSecrets struct {
	mu     sync.Mutex
	owners map[string]*startedSecrets
	// maxN and maxBytes are the bounds, MaxOwnerSecrets and
	// MaxOwnerSecretBytes unless a test set smaller ones before any Start.
	maxN, maxBytes int
}

// of returns owner's set, making it on first use. The pointer is stable:
// a stream keeps it for its life.
func (o *ownerSecrets) of(owner string) *startedSecrets {
	o.mu.Lock()
	defer o.mu.Unlock()
	ss := o.owners[owner]
	if ss == nil {
		if o.owners == nil {
			o.owners = map[string]*startedSecrets{}
		}
		ss = &startedSecrets{}
		o.owners[owner] = ss
	}
	return ss
}

// bounds returns the entry and byte bounds of each owner's set.
func (o *ownerSecrets) bounds() (int, int) {
	return cmp.Or(o.maxN, MaxOwnerSecrets), cmp.Or(o.maxBytes, MaxOwnerSecretBytes)
}

// wait returns once no owner's set merges in the background.
func (o *ownerSecrets) wait() {
	o.mu.Lock()
	sets := make([]*startedSecrets, 0, len(o.owners))
	for _, ss := range o.owners {
		sets = append(sets, ss)
	}
	o.mu.Unlock()
	for _, ss := range sets {
		ss.wait()
	}
}

// envOwnerSecrets is what of req's Env and its own Sandbox's Env.Set goes
// to its owner's set: the secret-looking values and URL passwords
// appendEnvSecret takes. The Manager's default policy's Env.Set values
// are the Manager's set's too (sandboxEnvSet).
func envOwnerSecrets(req Request) []secretEntry {
	var out []secretEntry
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		out = appendEnvSecret(out, k, req.Env[k])
	}
	if req.Sandbox != nil {
		set := req.Sandbox.Env.Set
		for _, k := range slices.Sorted(maps.Keys(set)) {
			out = appendEnvSecret(out, k, set[k])
		}
	}
	return out
}

// holdOwnerSecrets registers the secret-looking values of req's Env in the
// set of owner, before the process exists, and holds them there until
// the returned release is called (at the process's exit, or when its
// Start fails). It fails with ErrInvalidRequest when the values held by
// the owner's running processes and req's together pass the set's bound.
func (m *Manager) holdOwnerSecrets(req Request, owner string) (release func(), err error) {
	if m.cfg.noRedaction {
		return func() {}, nil
	}
	entries := envOwnerSecrets(req)
	if len(entries) == 0 {
		return func() {}, nil
	}
	n, b := m.owned.bounds()
	return m.owned.of(owner).hold(entries, n, b)
}

// ownerLive is the live sets of owner's started Env secrets, which a
// stream of that owner's processes reads; nil with redaction off.
func (m *Manager) ownerLive(owner string) *atomic.Pointer[liveSets] {
	if m.cfg.noRedaction {
		return nil
	}
	return &m.owned.of(owner).sets
}

// hold is register for an owner's set, bounded by maxN entries and
// maxBytes bytes of values, with entries held (never let go) until the
// returned release is called; release may be called more than once.
//
// Past the bound, the entries no hold keeps and entries does not name are
// let go, least recently held first, until the set is at three quarters
// of the bound (or as near as the held ones allow): letting go rebuilds
// the whole set (the base, under mu, as a Start's registration builds the
// recent set), so letting go of one at a time would make every Start past
// the bound pay for all of them. The Start is refused only when the held
// entries and entries alone pass the bound.
func (ss *startedSecrets) hold(entries []secretEntry, maxN, maxBytes int) (release func(), err error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	mine := map[secretEntry]bool{}
	var fresh []secretEntry
	freshBytes := 0
	for _, e := range entries {
		if mine[e] {
			continue
		}
		mine[e] = true
		if !ss.known[e] {
			fresh = append(fresh, e)
			freshBytes += len(e.value)
		}
	}
	if len(ss.entries)+len(fresh) > maxN || ss.bytes+freshBytes > maxBytes {
		if err := ss.letGoLocked(mine, fresh, maxN, maxBytes); err != nil {
			return nil, err
		}
	} else {
		ss.addLocked(fresh)
	}
	if ss.holds == nil {
		ss.holds, ss.used = map[secretEntry]int{}, map[secretEntry]uint64{}
	}
	ss.useSeq++
	for e := range mine {
		ss.holds[e]++
		ss.used[e] = ss.useSeq
	}
	return sync.OnceFunc(func() {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		for e := range mine {
			if ss.holds[e]--; ss.holds[e] <= 0 {
				delete(ss.holds, e)
			}
		}
	}), nil
}

// letGoLocked makes room for fresh (new to the set; mine is every entry of
// the Start, fresh among them) by letting go of the least recently held
// entries no process holds, and stores one base set of what is left and
// fresh. It fails, changing nothing, when the held entries and mine alone
// pass the bound.
func (ss *startedSecrets) letGoLocked(mine map[secretEntry]bool, fresh []secretEntry, maxN, maxBytes int) error {
	kept := func(e secretEntry) bool { return mine[e] || ss.holds[e] > 0 }
	var loose []secretEntry
	n, b := len(fresh), 0
	for _, e := range fresh {
		b += len(e.value)
	}
	for _, e := range ss.entries {
		if kept(e) {
			n++
			b += len(e.value)
		} else {
			loose = append(loose, e)
		}
	}
	if n > maxN || b > maxBytes {
		// The values are never named, only their count and bytes.
		return xerrors.Errorf("agentproc: Request.Env: the owner's running processes and this request carry %d secret-looking values of %d bytes in all, more than the owner's redaction set holds (MaxOwnerSecrets %d, MaxOwnerSecretBytes %d): %w",
			n, b, maxN, maxBytes, ErrInvalidRequest)
	}
	// Keep the most recently held loose entries while they fit in three
	// quarters of the bound.
	slices.SortStableFunc(loose, func(x, y secretEntry) int { return cmp.Compare(ss.used[y], ss.used[x]) })
	keepLoose := map[secretEntry]bool{}
	for _, e := range loose {
		if n+1 > maxN-maxN/4 || b+len(e.value) > maxBytes-maxBytes/4 {
			break
		}
		keepLoose[e] = true
		n++
		b += len(e.value)
	}
	// A new slice: a merge under way reads the old one without mu.
	left := make([]secretEntry, 0, n)
	for _, e := range ss.entries {
		if kept(e) || keepLoose[e] {
			left = append(left, e)
			continue
		}
		delete(ss.known, e)
		delete(ss.used, e)
	}
	if ss.known == nil {
		ss.known = map[secretEntry]bool{}
	}
	for _, e := range fresh {
		ss.known[e] = true
		left = append(left, e)
	}
	ss.entries, ss.inBase, ss.bytes = left, len(left), b
	// A merge under way built its base from entries let go: gen tells it
	// to drop it.
	ss.gen++
	// The base changes and the recent set empties: a stream's recent
	// stages release what they hold into the base's, which hold every
	// entry left (redactor.useLiveSets).
	ss.sets.Store(&liveSets{base: newRedactSet(slices.Clone(left))})
	return nil
}
