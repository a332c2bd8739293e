//go:build unix

package agentproc_test

import (
	"errors"
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
