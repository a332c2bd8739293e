//go:build unix

package agentproc_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/agentproc/agentproc"
)

func TestStartOrAttachSaysWhichItDid(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	s := m.Scope("chat")
	req := agentproc.Request{Command: "exec sleep 1000", Key: "k"}

	p, attached, err := s.StartOrAttach(req)
	if err != nil || attached {
		t.Fatalf("first StartOrAttach: attached %v, err %v; want a new process", attached, err)
	}
	q, attached, err := s.StartOrAttach(req)
	if err != nil || !attached || q != p {
		t.Fatalf("repeat: %v, attached %v, err %v; want the first process, attached", q, attached, err)
	}
	// Another owner's key namespace is its own.
	if _, attached, err := m.Scope("other").StartOrAttach(req); err != nil || attached {
		t.Fatalf("other owner: attached %v, err %v; want a new process", attached, err)
	}
	// Without a key nothing is ever attached.
	for range 2 {
		if _, attached, err := s.StartOrAttach(agentproc.Request{Command: "true"}); err != nil || attached {
			t.Fatalf("no key: attached %v, err %v; want a new process", attached, err)
		}
	}
	// A conflict attaches nothing.
	if _, attached, err := s.StartOrAttach(agentproc.Request{Command: "true", Key: "k"}); !errors.Is(err, agentproc.ErrKeyConflict) || attached {
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
			_, attached, err := m.Scope("").StartOrAttach(req)
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

func TestVerbatimSkipsBackgroundDetection(t *testing.T) {
	t.Parallel()
	m := newManager(t) // detection is on by default
	p := mustStart(t, m, agentproc.Request{Command: "true &", Verbatim: true})
	if info := mustWait(t, p); info.Command != "true &" || info.Background || info.Warnings != nil {
		t.Fatalf("got command %q, background %v, warnings %q; want the command as sent, not background",
			info.Command, info.Background, info.Warnings)
	}
	q := mustStart(t, m, agentproc.Request{Command: "true &"})
	if info := mustWait(t, q); info.Command != "true" || !info.Background {
		t.Fatalf("without Verbatim got command %q, background %v; want detection to apply", info.Command, info.Background)
	}
}
