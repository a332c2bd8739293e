package agentproc

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ownerTestRedacted reports whether a stream reading the Manager's live
// sets (none here) and then owner's redacts e whole when its start and its
// rest come in two writes, with change called between them.
func ownerTestRedacted(owner *startedSecrets, e secretEntry, change func()) bool {
	var manager startedSecrets
	var out bytes.Buffer
	r := redaction{live: &manager.sets, owner: &owner.sets, count: new(atomic.Int64)}.newRedactor(func(p []byte) { out.Write(p) })
	r.write([]byte("x " + e.value[:7]))
	change()
	r.write([]byte(e.value[7:] + " y"))
	r.flush()
	return out.String() == "x [redacted:"+e.name+"] y"
}

// TestRedactOwnerSetLetGoMidStream: when an owner's set lets entries go,
// a stream of that owner holding the start of an entry that stays (in
// its recent stages, which empty) still replaces it whole: the recent
// stages release what they hold into the base's, which hold every entry
// left. The owner's stages are the second live group, after the
// Manager's.
func TestRedactOwnerSetLetGoMidStream(t *testing.T) {
	t.Parallel()
	secrets := liveTestTokens(4)
	var ss startedSecrets
	for _, e := range secrets[:3] {
		release, err := ss.hold([]secretEntry{e}, 3, 1<<20)
		if err != nil {
			t.Fatalf("hold %s: %v", e.name, err)
		}
		release()
	}
	// secrets[2] is the most recently held: it stays when secrets[3]
	// makes the set let go; secrets[0] goes.
	if !ownerTestRedacted(&ss, secrets[2], func() {
		if _, err := ss.hold(secrets[3:], 3, 1<<20); err != nil {
			t.Fatalf("hold past the bound: %v", err)
		}
	}) {
		t.Errorf("a secret that stays, split across the write in which the set let others go: got it shown, want it redacted whole")
	}
	if ownerTestRedacted(&ss, secrets[0], func() {}) {
		t.Errorf("the least recently held secret: got it redacted, want it let go")
	}
	if ss.bytes != 3*len(secrets[0].value) || len(ss.entries) != 3 {
		t.Errorf("after letting go: got %d entries of %d bytes, want 3 of %d", len(ss.entries), ss.bytes, 3*len(secrets[0].value))
	}
}

// TestRedactOwnerSetLetGoDuringMerge: a merge under way when the set lets
// entries go built its base from entries some of which are gone; it
// stores nothing (gen), so what is let go stays gone and what is left
// stays in a stored set.
func TestRedactOwnerSetLetGoDuringMerge(t *testing.T) {
	t.Parallel()
	secrets := liveTestTokens(18)
	held, unblock := make(chan struct{}, 1), make(chan struct{})
	var ss startedSecrets
	ss.mergeHook = func() {
		select {
		case held <- struct{}{}:
		default:
		}
		<-unblock
	}
	unblocked := false
	defer func() {
		if !unblocked {
			close(unblock)
		}
		ss.wait()
	}()
	// The 17th secret makes the recent set outgrow its bound (16): a
	// merge begins and waits in mergeHook.
	for _, e := range secrets[:17] {
		release, err := ss.hold([]secretEntry{e}, 100, 1<<20)
		if err != nil {
			t.Fatalf("hold %s: %v", e.name, err)
		}
		release()
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatalf("after 17 secrets: no merge began within 10s")
	}
	// A bound of 8: the set lets go down to 6, the newest.
	if _, err := ss.hold(secrets[17:], 8, 1<<20); err != nil {
		t.Fatalf("hold past the bound: %v", err)
	}
	close(unblock)
	unblocked = true
	ss.wait()
	for i, e := range secrets {
		want := i >= 12
		if got := ownerTestRedacted(&ss, e, func() {}); got != want {
			t.Errorf("secret %d after the merge ended: got redacted %v, want %v", i, got, want)
		}
	}
}

// TestRedactOwnerSetsConcurrent: Starts of many owners at once, some
// refused, keep all owners' sets within their bounds, and the count of
// bytes (reservations included) comes back to what the sets hold.
func TestRedactOwnerSetsConcurrent(t *testing.T) {
	t.Parallel()
	secrets := liveTestTokens(64)
	size := len(secrets[0].value)
	o := ownerSecrets{maxSets: 4, maxAllBytes: 6 * size}
	defer o.wait()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 8 {
				e := secrets[g*8+i]
				release, err := o.hold(fmt.Sprint("owner", (g*8+i)%12), []secretEntry{e}, subjectEnv)
				if err != nil {
					if !errors.Is(err, ErrInvalidRequest) {
						t.Errorf("hold: got %v, want nil or ErrInvalidRequest", err)
					}
					continue
				}
				o.mu.Lock()
				valued, bytes := 0, o.bytes+o.reserved
				for _, set := range o.owners {
					if set.valued() {
						valued++
					}
				}
				o.mu.Unlock()
				if valued > 4 || bytes > 6*size {
					t.Errorf("while held: got %d sets of %d bytes, want at most 4 of %d", valued, bytes, 6*size)
				}
				release()
			}
		})
	}
	wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	sum := 0
	for _, set := range o.owners {
		set.ss.mu.Lock()
		sum += set.ss.bytes
		set.ss.mu.Unlock()
		if set.users != 0 || set.reserved != 0 {
			t.Errorf("after every release: a set with %d users and %d reserved, want none", set.users, set.reserved)
		}
	}
	if o.reserved != 0 || o.bytes != sum {
		t.Errorf("after every release: got %d bytes counted and %d reserved, want %d (the sets' own) and 0", o.bytes, o.reserved, sum)
	}
}
