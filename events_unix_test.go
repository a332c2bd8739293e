//go:build unix

package agentproc_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// TestEventsLifecycle: one process's started, ready (by a matched line),
// exited and dropped events arrive in that order with increasing sequence
// numbers, and a Scope's subscriber sees only its owner's events.
func TestEventsLifecycle(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithRetention(0, 0))
	ctx := testContext(t)
	all := m.Subscribe(ctx)
	mine := m.Scope("alice").Subscribe(ctx)
	p := mustStart(t, m.Scope("alice"), agentproc.Request{
		Command: `printf '\033[32mlistening on :8080\033[0m\n'`,
		Ready:   &agentproc.ReadyCheck{Match: `^listening on :\d+$`},
	})
	other := mustStart(t, m.Scope("bob"), agentproc.Request{Command: "exit 3"})
	mustWait(t, p)
	mustWait(t, other)

	want := []agentproc.EventType{agentproc.EventStarted, agentproc.EventReady, agentproc.EventExited, agentproc.EventDropped}
	var got []agentproc.Event
	for e := range mine {
		got = append(got, e)
		if e.Type == agentproc.EventDropped {
			break
		}
	}
	if len(got) != len(want) {
		t.Fatalf("alice's events: got %+v, want types %v", got, want)
	}
	for i, e := range got {
		if e.Type != want[i] || e.ID != p.ID() || e.Owner != "alice" {
			t.Errorf("event %d: got %s of %s (owner %q), want %s of %s", i, e.Type, e.ID, e.Owner, want[i], p.ID())
		}
		if i > 0 && e.Seq <= got[i-1].Seq {
			t.Errorf("event %d: seq %d after %d, want increasing", i, e.Seq, got[i-1].Seq)
		}
	}
	if got[1].Line != "listening on :8080" {
		t.Errorf("ready line: got %q, want the rendered line", got[1].Line)
	}
	if info := got[2].Info; info == nil || info.Running || exitCode(*info) != 0 {
		t.Errorf("exited event: got Info %+v, want the final Info", info)
	}
	// The Manager's subscriber sees bob's process too.
	seen := map[string]int{}
	for e := range all {
		if e.Type == agentproc.EventExited {
			seen[e.ID]++
			if len(seen) == 2 {
				break
			}
		}
	}
	if seen[p.ID()] != 1 || seen[other.ID()] != 1 {
		t.Errorf("Manager subscriber exits: got %v, want one of each", seen)
	}
}

// TestEventsThousandExits: 1,000 processes exit at once (Close stops them
// together) with 10 subscribers, one of which never reads. Every reading
// subscriber sees every start and exit exactly once in sequence order; the
// non-reader finds its EventBuffer oldest events and then one EventLost for
// the rest; no goroutine is left (goleak in TestMain).
func TestEventsThousandExits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 1,000 processes")
	}
	const n = 1000
	m := agentproc.New(agentproc.WithRetention(time.Hour, 2*n))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type result struct {
		exits, starts, all int
		ordered            bool
	}
	results := make([]result, 9)
	var wg sync.WaitGroup
	for i := range results {
		ch := m.Subscribe(ctx)
		wg.Go(func() {
			r := result{ordered: true}
			var last uint64
			seen := map[string]bool{}
			for e := range ch {
				if e.Seq <= last || e.Type == agentproc.EventLost {
					r.ordered = false
				}
				last = e.Seq
				r.all++
				switch e.Type {
				case agentproc.EventStarted:
					r.starts++
				case agentproc.EventExited:
					if seen[e.ID] {
						r.ordered = false // a second exit of one process
					}
					seen[e.ID] = true
					r.exits++
				}
			}
			results[i] = r
		})
	}
	idleCtx, idleCancel := context.WithCancel(ctx)
	defer idleCancel()
	idle := m.Subscribe(idleCtx)

	// Each process waits for EOF on its stdin; closing them all in one
	// loop makes them exit together.
	procs := make([]*agentproc.Process, n)
	for i := range procs {
		p, err := m.Start(agentproc.Request{Command: "exec cat", Stdin: true})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		procs[i] = p
	}
	for _, p := range procs {
		if err := p.CloseStdin(); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait() // the readers' channels close once Close delivered every exit
	for i, r := range results {
		if r.starts != n || r.exits != n || !r.ordered {
			t.Errorf("subscriber %d: got %d starts, %d exits, in order %v; want %d each, in order", i, r.starts, r.exits, r.ordered, n)
		}
	}
	// Now read what the non-reader was left with.
	var queued int
	var lost uint64
	for e := range idle {
		if e.Type == agentproc.EventLost {
			lost += e.Lost
			continue
		}
		if lost > 0 {
			t.Errorf("event %+v after the EventLost, want none", e)
		}
		queued++
	}
	// The forwarder holds one event beyond the EventBuffer it queues.
	// Every event the readers got (starts, exits, and the awaiting_input
	// of each cat blocked on its stdin) was queued or counted lost.
	if queued < agentproc.EventBuffer || queued > agentproc.EventBuffer+1 || queued+int(lost) != results[0].all {
		t.Errorf("non-reader: got %d queued and %d lost, want %d (+1) queued and %d in all", queued, lost, agentproc.EventBuffer, results[0].all)
	}
}

// TestSubscribeAfter replays retained events after a sequence number, the
// way a reconnecting client resumes.
func TestSubscribeAfter(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "exit 0"})
	mustWait(t, p)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	var got []agentproc.Event
	for e := range m.SubscribeAfter(ctx, 0) {
		got = append(got, e)
		if e.Type == agentproc.EventExited {
			break
		}
	}
	if len(got) != 2 || got[0].Type != agentproc.EventStarted || got[0].Seq != 1 {
		t.Fatalf("replay from 0: got %+v, want started (seq 1) and exited", got)
	}
	e, ok := <-m.SubscribeAfter(ctx, got[0].Seq)
	if !ok || e.Type != agentproc.EventExited || e.Seq != got[1].Seq {
		t.Errorf("replay after %d: got %+v (open %v) first, want the exited event", got[0].Seq, e, ok)
	}
}

// TestReadyCheckValidated: a Request.Ready that cannot work starts nothing.
func TestReadyCheckValidated(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	for _, r := range []agentproc.ReadyCheck{{Match: "("}, {Port: -1}, {Port: 70000}} {
		if _, err := m.Start(agentproc.Request{Command: "exit 0", Ready: &r}); !errors.Is(err, agentproc.ErrInvalidRequest) {
			t.Errorf("Ready %+v: got %v, want ErrInvalidRequest", r, err)
		}
	}
	if got := m.List(); len(got) != 0 {
		t.Errorf("List: got %d processes, want none started", len(got))
	}
}
