//go:build unix

package agentproc_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/agentproc/agentproc"
)

func TestOwnerIsolation(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	alice, bob := m.Scope("alice"), m.Scope("bob")
	pa := mustStart(t, alice, agentproc.Request{Command: "sleep 1000"})
	pb := mustStart(t, bob, agentproc.Request{Command: "sleep 1000"})

	if _, err := alice.Get(pb.ID()); !errors.Is(err, agentproc.ErrNotFound) {
		t.Errorf("alice.Get(bob's): got %v, want ErrNotFound", err)
	}
	if got, err := alice.Get(pa.ID()); err != nil || got != pa {
		t.Errorf("alice.Get(own): got (%v, %v), want her process", got, err)
	}
	if got := alice.List(); len(got) != 1 || got[0].ID != pa.ID() || got[0].Owner != "alice" {
		t.Errorf("alice.List: got %+v, want only her process", got)
	}
	if got := m.Scope("").List(); len(got) != 0 {
		t.Errorf("unowned scope List: got %d, want 0", len(got))
	}
	if got := len(m.List()); got != 2 {
		t.Errorf("manager List: got %d, want 2", got)
	}
	// Signalling goes through Get, so another owner can never reach it.
	if p, err := bob.Get(pa.ID()); err == nil {
		_ = p.Signal(agentproc.SignalKill)
		t.Errorf("bob.Get(alice's): got the process, want ErrNotFound")
	}
	if !pa.Info().Running {
		t.Errorf("alice's process stopped by bob's scope")
	}
	for _, p := range []*agentproc.Process{pa, pb} {
		if _, err := p.Stop(testContext(t)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStartOrAttachSaysWhichItDid(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	s := m.Scope("chat")
	req := agentproc.Request{Command: "exec sleep 1000", Key: "k"}

	p, attached, err := s.StartOrAttach(t.Context(), req)
	if err != nil || attached {
		t.Fatalf("first StartOrAttach: attached %v, err %v; want a new process", attached, err)
	}
	q, attached, err := s.StartOrAttach(t.Context(), req)
	if err != nil || !attached || q != p {
		t.Fatalf("repeat: %v, attached %v, err %v; want the first process, attached", q, attached, err)
	}
	// Another owner's key namespace is its own.
	if _, attached, err := m.Scope("other").StartOrAttach(t.Context(), req); err != nil || attached {
		t.Fatalf("other owner: attached %v, err %v; want a new process", attached, err)
	}
	// Without a key nothing is ever attached.
	for range 2 {
		if _, attached, err := s.StartOrAttach(t.Context(), agentproc.Request{Command: "true"}); err != nil || attached {
			t.Fatalf("no key: attached %v, err %v; want a new process", attached, err)
		}
	}
	// A conflict attaches nothing.
	if _, attached, err := s.StartOrAttach(t.Context(), agentproc.Request{Command: "true", Key: "k"}); !errors.Is(err, agentproc.ErrKeyConflict) || attached {
		t.Fatalf("conflict: attached %v, err %v; want ErrKeyConflict", attached, err)
	}
}

// TestStartOrAttachConcurrent checks that of many concurrent keyed starts
// exactly one says it started the process.
func TestStartOrAttachConcurrent(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	req := agentproc.Request{Command: "exec sleep 1000", Key: "once"}
	const starters = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	spawned := 0
	gate := make(chan struct{})
	for range starters {
		wg.Go(func() {
			<-gate
			_, attached, err := m.Scope("").StartOrAttach(t.Context(), req)
			if err != nil {
				t.Errorf("StartOrAttach: %v", err)
				return
			}
			if !attached {
				mu.Lock()
				spawned++
				mu.Unlock()
			}
		})
	}
	close(gate)
	wg.Wait()
	if spawned != 1 {
		t.Fatalf("%d calls said they started the process, want 1", spawned)
	}
}
