package agentproc

import (
	"context"
	"testing"
	"time"
)

// TestRunningProcessesAskNothingAtSIGCHLD: a running process whose output
// is open is not subscribed to SIGCHLD, so another child's exit costs the
// host nothing per running process. The third mend's reaper subscribed
// every process from its Start: with 1,000 idle commands running, each
// short command's exit cost the host 2.0–2.5 ms more CPU
// (docs/measurements.md). Not parallel: it counts the package's
// subscribers; the margin leaves room for another test's leftovers.
func TestRunningProcessesAskNothingAtSIGCHLD(t *testing.T) {
	subs := func() int {
		sigchld.mu.Lock()
		defer sigchld.mu.Unlock()
		return len(sigchld.subs)
	}
	before := subs()
	m := New()
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const idle = 20
	for range idle {
		if _, err := m.Start(ctx, Request{Command: "exec sleep 1000"}); err != nil {
			t.Fatal(err)
		}
	}
	// A short command's exit: its SIGCHLD reaches every subscriber.
	p, err := m.Start(ctx, Request{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := subs() - before; got >= idle/2 {
		t.Errorf("%d more SIGCHLD subscribers with %d idle commands running, want none: each would ask at every child's exit", got, idle)
	}
}
