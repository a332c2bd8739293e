package agentproc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"reflect"

	"golang.org/x/xerrors"
)

// keyID is an idempotency key in its owner's namespace: two owners may use
// the same Key without ever seeing each other's process.
type keyID struct {
	owner, key string
}

// keyEntry is what a Key names: a retained process, or a Start that is
// still spawning it.
type keyEntry struct {
	id  keyID
	req Request // the fields sameKeyedRequest compares
	// digest, when not "", stands for req: the key of a process adopted
	// from a state dir, whose record keeps only keyDigest of its request.
	digest string
	// p is nil while the first Start spawns; set under m.mu.
	p *Process
	// ready is closed when that Start has ended, whether it succeeded or not.
	ready chan struct{}
}

// claimKey resolves req.Key for owner. It returns the retained process the
// key names when req matches the request that started it, ErrKeyConflict
// when it does not, and otherwise a new claim: the caller starts the process
// and must settle the claim with settleKeyLocked, successful or not.
//
// A Start that finds the key claimed by a Start still spawning waits for it
// to end, or for ctx to end, instead of spawning a second process: that is
// what makes two concurrent Starts with one new key start exactly one
// process. If the first Start fails, the waiter claims the key and tries
// itself.
func (m *Manager) claimKey(ctx context.Context, req Request, owner string) (*Process, *keyEntry, error) {
	id := keyID{owner, req.Key}
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		// Retention is applied lazily; without this a key whose process
		// has aged out would still hold the key.
		m.reapLocked()
		e, ok := m.keys[id]
		if !ok {
			req.Env = maps.Clone(req.Env) // the caller may reuse its map
			e = &keyEntry{id: id, req: req, ready: make(chan struct{})}
			if m.keys == nil {
				m.keys = make(map[keyID]*keyEntry)
			}
			m.keys[id] = e
			return nil, e, nil
		}
		if e.digest != "" && e.digest != keyDigest(req) || e.digest == "" && !sameKeyedRequest(e.req, req) {
			return nil, nil, xerrors.Errorf("key %q: %w", req.Key, ErrKeyConflict)
		}
		if e.p != nil {
			return e.p, nil, nil
		}
		m.mu.Unlock()
		// Spawning is short (fork and exec, no waiting on the command), but
		// it is still a wait, so ctx can end it.
		select {
		case <-e.ready:
		case <-ctx.Done():
			m.mu.Lock() // the deferred Unlock expects it held
			return nil, nil, ctx.Err()
		}
		m.mu.Lock()
	}
}

// settleKeyLocked ends a claim: the key now names p, or is free again when
// p is nil because the Start failed. A nil claim (no Key) is ignored.
func (m *Manager) settleKeyLocked(e *keyEntry, p *Process) {
	if e == nil {
		return
	}
	if p == nil {
		delete(m.keys, e.id)
	} else {
		e.p = p
		if m.keyOf == nil {
			m.keyOf = make(map[string]*keyEntry)
		}
		m.keyOf[p.id] = e
	}
	close(e.ready)
}

// freeKeyLocked releases the key of a process retention dropped.
func (m *Manager) freeKeyLocked(p *Process) {
	e, ok := m.keyOf[p.id]
	if !ok {
		return
	}
	delete(m.keyOf, p.id)
	if m.keys[e.id] == e {
		delete(m.keys, e.id)
	}
}

// sameKeyedRequest reports whether a retried Start asks for the same
// command as the one that took the key. Timeout is not compared: it limits
// the run, it does not say what runs. Stdin and TTY are: a caller that
// expects to type into the process, or a terminal of some size, must not be
// handed one without; nor one that asked for a process that outlives the
// Manager (Detach) one that does not, nor one confined otherwise (Sandbox).
func sameKeyedRequest(a, b Request) bool {
	return a.Command == b.Command &&
		a.WorkDir == b.WorkDir &&
		a.Background == b.Background &&
		a.Detach == b.Detach &&
		a.Stdin == b.Stdin &&
		sameTTY(a.TTY, b.TTY) &&
		maps.Equal(a.Env, b.Env) &&
		reflect.DeepEqual(a.Sandbox, b.Sandbox)
}

func sameTTY(a, b *TTYSize) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// keyDigest is a hash of the fields sameKeyedRequest compares, for the
// record of a keyed process ("" without a Key): a Manager that adopts the
// process answers a retried Start with it, and the record need not hold the
// request's environment, which may carry secrets.
func keyDigest(req Request) string {
	if req.Key == "" {
		return ""
	}
	data, err := json.Marshal(struct {
		Command, WorkDir          string
		Background, Detach, Stdin bool
		TTY                       *TTYSize
		Env                       map[string]string // encoded in key order
	}{req.Command, req.WorkDir, req.Background, req.Detach, req.Stdin, req.TTY, req.Env})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// adoptKeyLocked lets the key of an adopted process name it again, so that
// a Start retried after a restart attaches to it instead of running the
// command a second time. A key already taken in this Manager (a Start that
// ran before recovery registered the process) is left as it is.
func (m *Manager) adoptKeyLocked(p *Process, owner, key, digest string) {
	if key == "" || digest == "" {
		return
	}
	id := keyID{owner, key}
	if _, ok := m.keys[id]; ok {
		return
	}
	e := &keyEntry{id: id, digest: digest, p: p, ready: closedChan}
	if m.keys == nil {
		m.keys = make(map[keyID]*keyEntry)
	}
	m.keys[id] = e
	if m.keyOf == nil {
		m.keyOf = make(map[string]*keyEntry)
	}
	m.keyOf[p.id] = e
}
