//go:build unix

package agentproc_test

import (
	"sync"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestScopeReplayCountsOwnLosses: a scoped replay from 0 after another
// owner's traffic pushed everything out of the retained events counts only
// the subscriber's own lost events: none for an owner that had no process,
// exactly its own for one that had some.
func TestScopeReplayCountsOwnLosses(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithRetention(0, 0))
	alice, bob, carol := m.Scope("alice"), m.Scope("bob"), m.Scope("carol")
	// started, exited and dropped: three events each.
	for range 2 {
		mustWait(t, mustStart(t, alice, agentproc.Request{Command: "true"}))
	}
	const bobs = agentproc.EventBuffer/3 + 10
	var wg sync.WaitGroup
	work := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for range work {
				mustWait(t, mustStart(t, bob, agentproc.Request{Command: "true"}))
			}
		})
	}
	for range bobs {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	m.List() // retention drops the last exits: their dropped events

	ctx := testContext(t) // after the traffic, which takes long on a loaded host

	first := func(s *agentproc.Scope) agentproc.Event {
		t.Helper()
		events := s.SubscribeAfter(ctx, 0)
		// An event of the owner's that is surely after the replay.
		p := mustStart(t, s, agentproc.Request{Command: "true"})
		for {
			select {
			case e := <-events:
				if e.Type == agentproc.EventLost || e.ID == p.ID() {
					mustWait(t, p)
					return e
				}
			case <-ctx.Done():
				t.Fatal("no event")
			}
		}
	}
	if e := first(carol); e.Type != agentproc.EventStarted {
		t.Errorf("carol, who had no process, resuming from 0: got %+v, want no EventLost", e)
	}
	if e := first(alice); e.Type != agentproc.EventLost || e.Lost != 6 {
		t.Errorf("alice resuming from 0: got %+v, want EventLost counting her 6 events", e)
	}
}
