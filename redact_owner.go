package agentproc

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
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

// Bounds on all owners' sets together: without httpapi.WithAuthorize the
// owner is a header the client chooses, so a bound per owner alone bounds
// nothing against a hostile client.
const (
	// MaxOwnerSets is the most owners whose redaction sets hold values at
	// once. Past it, the sets of owners none of whose processes runs are
	// dropped, least recently used first.
	MaxOwnerSets = 256
	// MaxAllOwnersSecretBytes bounds the bytes of the values all owners'
	// redaction sets hold together, sixteen owners' worth (about 100 to
	// 320 MiB of heap at the most, by the values' kind); past it, sets are
	// dropped as past MaxOwnerSets.
	MaxAllOwnersSecretBytes = 16 * MaxOwnerSecretBytes
)

// ownerSecrets holds, per owner (Process.owner; "" for Manager.Start),
// the started set of the secret-looking values of the Env of the
// requests that owner has started (Manager.holdOwnerSecrets). They are
// redacted in the output of that owner's processes only: redacting them
// in every owner's stream cost every owner's Start and stream for good
// and let another owner test guesses (sixth mend's open row). Each set is
// bounded (startedSecrets.hold), and so are all together (acquire). The
// zero value is ready.
type ownerSecrets struct {
	mu     sync.Mutex
	owners map[string]*ownerSet
	// bytes is the sum of the sets' bytes as counted (ownerSet.bytes),
	// reserved what the Starts under way may add to them; useSeq orders
	// the sets' uses (ownerSet.used).
	bytes, reserved int
	useSeq          uint64
	// merges counts every set's background merges, those of sets dropped
	// since among them.
	merges sync.WaitGroup
	// maxN and maxBytes are the bounds of each set, MaxOwnerSecrets and
	// MaxOwnerSecretBytes, maxSets and maxAllBytes those of all sets,
	// MaxOwnerSets and MaxAllOwnersSecretBytes, unless a test set smaller
	// ones before any Start.
	maxN, maxBytes, maxSets, maxAllBytes int
}

// ownerSet is one owner's set and what ownerSecrets knows of it, under
// its mu.
type ownerSet struct {
	ss *startedSecrets
	// users is how many of the owner's processes run (each Start holds
	// its set from before its spawn to its exit, values or none); pinned
	// says a recovered process reads it (ownerLive), which no exit
	// releases. A set with either is never dropped: a stream keeps its
	// owner's set for its life, and a later set for the same owner would
	// be one it does not read.
	users  int
	pinned bool
	// bytes is ss.bytes as the holds that ended counted it (acquire);
	// reserved what Starts under way may add to it; used when it was last
	// acquired (ownerSecrets.useSeq).
	bytes, reserved int
	used            uint64
}

// valued reports whether s holds values or may soon: it counts against
// MaxOwnerSets.
func (s *ownerSet) valued() bool { return s.bytes+s.reserved > 0 }

// bounds returns the entry and byte bounds of each owner's set.
func (o *ownerSecrets) bounds() (int, int) {
	return cmp.Or(o.maxN, MaxOwnerSecrets), cmp.Or(o.maxBytes, MaxOwnerSecretBytes)
}

// allBounds returns the bounds of all owners' sets together: how many
// sets hold values and their bytes.
func (o *ownerSecrets) allBounds() (int, int) {
	return cmp.Or(o.maxSets, MaxOwnerSets), cmp.Or(o.maxAllBytes, MaxAllOwnersSecretBytes)
}

// setLocked returns owner's set, making it when there is none.
func (o *ownerSecrets) setLocked(owner string) *ownerSet {
	set := o.owners[owner]
	if set == nil {
		if o.owners == nil {
			o.owners = map[string]*ownerSet{}
		}
		set = &ownerSet{ss: &startedSecrets{group: &o.merges}}
		o.owners[owner] = set
	}
	return set
}

// acquire holds owner's set for one process about to start with entries
// (which it may add to the set), and reserves the bytes of those the set
// does not know until the returned done is called with what the
// registration changed (holdCounted); unacquire ends the hold at the
// process's exit. The count of all sets' bytes is then exact but for
// one race, transient and within one set's bound: a value let go by
// another Start of the same owner between acquire and the registration
// is added again unreserved, and counted at done.
//
// Past the bounds of all sets (MaxOwnerSets, MaxAllOwnersSecretBytes) it
// drops the sets of other owners no process uses, least recently used
// first; it fails with ErrInvalidRequest, holding nothing, when even
// then the sets would pass one.
func (o *ownerSecrets) acquire(owner string, entries []secretEntry) (set *ownerSet, done func(grew int), err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	set = o.setLocked(owner)
	// What entries may add: the bytes of those the set does not know.
	// Read under the set's lock (ownerSecrets.mu, then startedSecrets.mu,
	// the one order); a let-go may leave the set smaller.
	fresh := 0
	set.ss.mu.Lock()
	for _, e := range entries {
		if !set.ss.known[e] {
			fresh += len(e.value)
		}
	}
	set.ss.mu.Unlock()
	if fresh > 0 {
		if err := o.makeRoomLocked(set, fresh); err != nil {
			if set.users == 0 && !set.pinned && !set.valued() {
				delete(o.owners, owner)
			}
			return nil, nil, err
		}
	}
	set.users++
	o.useSeq++
	set.used = o.useSeq
	set.reserved += fresh
	o.reserved += fresh
	return set, func(grew int) {
		o.mu.Lock()
		defer o.mu.Unlock()
		set.reserved -= fresh
		o.reserved -= fresh
		set.bytes += grew
		o.bytes += grew
	}, nil
}

// makeRoomLocked drops the sets other than set that no process uses, least
// recently used first, until set holding fresh more bytes keeps all sets
// within their bounds; it fails, having dropped none, when dropping all
// of them would not do.
func (o *ownerSecrets) makeRoomLocked(set *ownerSet, fresh int) error {
	maxSets, maxBytes := o.allBounds()
	sets, loose := 0, []string{}
	for owner, x := range o.owners {
		if x.valued() || x == set {
			sets++
		}
		if x != set && x.users == 0 && !x.pinned {
			loose = append(loose, owner)
		}
	}
	over := func(sets, bytes int) bool { return sets > maxSets || bytes+fresh > maxBytes }
	bytes := o.bytes + o.reserved
	if !over(sets, bytes) {
		return nil
	}
	slices.SortFunc(loose, func(x, y string) int { return cmp.Compare(o.owners[x].used, o.owners[y].used) })
	keptSets, keptBytes := sets, bytes
	for _, owner := range loose {
		if x := o.owners[owner]; x.valued() {
			keptSets--
			keptBytes -= x.bytes
		}
	}
	if over(keptSets, keptBytes) {
		// The values are never named, only their count and bytes.
		return &setFullError{subject: subjectEnv, all: true, n: keptSets, bytes: keptBytes + fresh, maxN: maxSets, maxBytes: maxBytes}
	}
	for _, owner := range loose {
		if !over(sets, bytes) {
			break
		}
		x := o.owners[owner]
		if x.valued() {
			sets--
			bytes -= x.bytes
		}
		delete(o.owners, owner)
		o.bytes -= x.bytes
		x.ss.empty()
	}
	return nil
}

// empty lets go of every entry of an owner's set being dropped. The
// Process of each of the owner's processes that exited keeps its set
// (redaction.owner) while it is retained, so dropping it from the map
// alone would free nothing. No stream reads it any more: a process's
// stream has drained before its exit releases the set (registerExit),
// and a recovered process's set is never dropped (ownerSet.pinned). A
// merge under way stores nothing (gen; its goroutine counts in
// ownerSecrets.merges).
func (ss *startedSecrets) empty() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.entries, ss.known, ss.values, ss.holds, ss.used = nil, nil, nil, nil, nil
	ss.inBase, ss.bytes = 0, 0
	ss.gen++
	ss.sets.Store(&liveSets{})
}

// unacquire ends one process's use of owner's set (acquire); a set no
// process uses and that holds no values is dropped at once.
func (o *ownerSecrets) unacquire(owner string, set *ownerSet) {
	o.mu.Lock()
	defer o.mu.Unlock()
	set.users--
	if set.users == 0 && !set.pinned && !set.valued() && o.owners[owner] == set {
		delete(o.owners, owner)
	}
}

// peek returns owner's live sets, nil when it has none; it makes none.
func (o *ownerSecrets) peek(owner string) *atomic.Pointer[liveSets] {
	o.mu.Lock()
	defer o.mu.Unlock()
	if set := o.owners[owner]; set != nil {
		return &set.ss.sets
	}
	return nil
}

// wait returns once no owner's set merges in the background, those
// dropped included.
func (o *ownerSecrets) wait() { o.merges.Wait() }

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
// set of owner, before the process exists, and holds them there, and the
// set in the owner's map, until the returned release is called (at the
// process's exit, or when its Start fails). Values that are the
// Manager's (the host's, WithSecrets, or in its started set, req's own
// Request.Secrets and sandbox Env.Set among them) are left out: every
// stream redacts them already. It fails with ErrInvalidRequest when the
// values held by the owner's running processes and req's together pass
// the set's bound, or all owners' sets would pass theirs.
func (m *Manager) holdOwnerSecrets(req Request, owner string) (release func(), err error) {
	if m.cfg.noRedaction {
		return func() {}, nil
	}
	return m.owned.hold(owner, m.notManagers(req, envOwnerSecrets(req)), subjectEnv)
}

// hold holds owner's set for one process and entries in it (acquire,
// then startedSecrets.hold) until the returned release is called. A
// refusal names subject as what the entries are (subjectEnv,
// subjectProxyToken).
func (o *ownerSecrets) hold(owner string, entries []secretEntry, subject string) (release func(), err error) {
	defer func() {
		var full *setFullError
		if errors.As(err, &full) {
			full.subject = subject
		}
	}()
	set, done, err := o.acquire(owner, entries)
	if err != nil {
		return nil, err
	}
	unhold, grew := func() {}, 0
	if len(entries) > 0 {
		n, b := o.bounds()
		unhold, grew, err = set.ss.holdCounted(entries, n, b)
	}
	done(grew)
	if err != nil {
		o.unacquire(owner, set)
		return nil, err
	}
	return sync.OnceFunc(func() {
		unhold()
		if subject == subjectProxyToken {
			// A tree's token opens nothing once its tree ends: it goes
			// first when the set is past its bound, before any Env secret
			// the set keeps for a copy an exited process left.
			set.ss.spent(entries)
		}
		o.unacquire(owner, set)
	}), nil
}

// spent makes those of entries no process holds the least recently held
// of the set, the first let go past its bound (letGoLocked): a released
// proxy token was otherwise the most recently held value, and each ended
// NetworkHosts tree's pushed out an older Env secret of its owner
// (eighteenth attack review, TestAttackDeadProxyTokensPushOutEnvSecrets).
func (ss *startedSecrets) spent(entries []secretEntry) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, e := range entries {
		if _, ok := ss.used[e]; ok && ss.holds[e] == 0 {
			ss.used[e] = 0
		}
	}
}

// notManagers returns entries without those whose value the Manager
// redacts in every stream: the host's and WithSecrets (m.redact), its
// started set's, and those req is about to add to it (processSecrets).
func (m *Manager) notManagers(req Request, entries []secretEntry) []secretEntry {
	if len(entries) == 0 {
		return nil
	}
	theirs := map[string]bool{}
	if m.redact != nil {
		for _, e := range m.redact.entries {
			theirs[e.value] = true
		}
	}
	for _, e := range requestSecrets(req, m.sandboxEnvSet(req), true) {
		theirs[e.value] = true
	}
	values := make([]string, len(entries))
	for i, e := range entries {
		values[i] = e.value
	}
	started := m.started.hasValues(values)
	out := entries[:0]
	for i, e := range entries {
		if !theirs[e.value] && !started[i] {
			out = append(out, e)
		}
	}
	return out
}

// ownerLive is the live sets of owner's started Env secrets, which a
// stream of that owner's processes reads; nil with redaction off. A
// Start's process finds its set held (holdOwnerSecrets); a recovered
// one's set is pinned, never dropped, since no exit of this Manager's
// releases it.
func (m *Manager) ownerLive(owner string) *atomic.Pointer[liveSets] {
	if m.cfg.noRedaction {
		return nil
	}
	m.owned.mu.Lock()
	defer m.owned.mu.Unlock()
	set := m.owned.setLocked(owner)
	if set.users == 0 {
		set.pinned = true
	}
	return &set.ss.sets
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
	release, _, err = ss.holdCounted(entries, maxN, maxBytes)
	return release, err
}

// holdCounted is hold, and says by how many bytes the set's values grew
// (or shrank, letting go): ownerSecrets counts each hold's change, so
// that another hold's, under way on the same set, is not counted twice.
func (ss *startedSecrets) holdCounted(entries []secretEntry, maxN, maxBytes int) (release func(), grew int, err error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	before := ss.bytes
	defer func() { grew = ss.bytes - before }()
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
			return nil, 0, err
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
	}), 0, nil
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
		return &setFullError{subject: subjectEnv, n: n, bytes: b, maxN: maxN, maxBytes: maxBytes}
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
		if ss.values[e.value]--; ss.values[e.value] <= 0 {
			delete(ss.values, e.value)
		}
	}
	if ss.known == nil {
		ss.known = map[secretEntry]bool{}
	}
	for _, e := range fresh {
		ss.known[e] = true
		ss.addValueLocked(e.value)
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

// What a refused hold's entries are, for its error (setFullError).
const (
	subjectEnv        = "Request.Env"
	subjectProxyToken = "NetworkHosts proxy token"
)

// setFullError is a hold refused past the bound of the owner's set or,
// with all, of all owners' sets. It names what the refused entries are:
// a NetworkHosts Start without Env is refused for its tree's proxy token
// (newHostsRun), and an error that said "Request.Env" sent its reader to
// look for values the request does not carry (eighteenth attack review,
// TestAttackHostsStartRefusedNamesEnv).
type setFullError struct {
	subject        string
	all            bool
	n, bytes       int
	maxN, maxBytes int
}

func (e *setFullError) Error() string {
	// The values are never named, only their count and bytes.
	what := "this request carry"
	if e.subject == subjectProxyToken {
		what = "the proxy token of the tree this Start makes (one a tree, held in its owner's set while it runs) carry"
	}
	if e.all {
		return fmt.Sprintf("agentproc: %s: the owners' running processes and %s secret-looking values of %d bytes in %d owners' redaction sets, more than all owners' sets hold (MaxOwnerSets %d, MaxAllOwnersSecretBytes %d): %v",
			e.subject, what, e.bytes, e.n, e.maxN, e.maxBytes, ErrInvalidRequest)
	}
	return fmt.Sprintf("agentproc: %s: the owner's running processes and %s %d secret-looking values of %d bytes in all, more than the owner's redaction set holds (MaxOwnerSecrets %d, MaxOwnerSecretBytes %d): %v",
		e.subject, what, e.n, e.bytes, e.maxN, e.maxBytes, ErrInvalidRequest)
}

// Unwrap makes the refusal an ErrInvalidRequest.
func (e *setFullError) Unwrap() error { return ErrInvalidRequest }
