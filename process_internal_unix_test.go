//go:build unix

package agentproc

import (
	"context"
	"regexp"
	"sync"
	"testing"
	"time"
)

// TestNoProcessLockAcrossSignal holds a signal in flight inside the OS
// handle's signal gate (sysProc.signalHook) and checks that the process's lock is
// free meanwhile: Info and Output return while the kill(2) has not been
// made. Were a process lock held across the signal call (as Signal and
// Stop once held it), they would block until the hook lets go, and the
// deadline would fail the test. The exit must still be claimed by the
// signal that was in flight.
func TestNoProcessLockAcrossSignal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		send func(ctx context.Context, p *Process) error
	}{
		{"Signal", func(_ context.Context, p *Process) error { return p.Signal(SignalTerminate) }},
		{"Stop", func(ctx context.Context, p *Process) error { _, err := p.Stop(ctx); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			m := New(WithGracePeriod(time.Minute))
			defer m.Close()
			p, err := m.Start(ctx, Request{Command: "echo ready; exec sleep 1000"})
			if err != nil {
				t.Fatal(err)
			}
			// Event: the shell printed ready, so the exec follows and
			// SIGTERM ends the tree.
			if _, err := p.WaitMatch(ctx, regexp.MustCompile(`^ready$`)); err != nil {
				t.Fatal(err)
			}
			inSignal, letGo := make(chan struct{}), make(chan struct{})
			var once sync.Once
			p.sup.sys.signalHook = func() {
				once.Do(func() {
					close(inSignal)
					<-letGo
				})
			}
			sent := make(chan error, 1)
			go func() { sent <- tt.send(ctx, p) }()
			// Event: the signal call is under the signal gate, its kill(2) not
			// yet made.
			select {
			case <-inSignal:
			case <-ctx.Done():
				t.Fatal("the signal never reached the signal gate")
			}
			read := make(chan Info, 1)
			go func() {
				_ = p.Output()
				read <- p.Info()
			}()
			select {
			case info := <-read:
				if !info.Running {
					t.Errorf("Info during the signal: got not running, want running")
				}
			case <-ctx.Done():
				close(letGo)
				t.Fatal("Info blocked while a signal was in flight: a process lock is held across the signal call")
			}
			close(letGo)
			select {
			case err := <-sent:
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
			case <-ctx.Done():
				t.Fatalf("%s did not return", tt.name)
			}
			info, err := p.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.Reason != ReasonKilled {
				t.Errorf("reason: got %q, want %q", info.Reason, ReasonKilled)
			}
		})
	}
}

// TestGateClosedAfterExit: once the exit path has killed the leftovers, the
// group's signal gate is closed: a signal returns errNoProcess and records nothing
// (its callback does not run), so no later Signal or Stop can claim an exit
// that happened by itself.
func TestGateClosedAfterExit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := New()
	defer m.Close()
	p, err := m.Start(ctx, Request{Command: "exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	info, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []Signal{SignalInterrupt, SignalTerminate, SignalKill} {
		ran := false
		if err := p.sup.sys.signal(sig, func() { ran = true }); err != errNoProcess || ran {
			t.Errorf("signal %s after the exit: got (%v, callback ran %v), want (errNoProcess, false)", sig, err, ran)
		}
	}
	if info.Reason != ReasonExited {
		t.Errorf("reason: got %q, want %q", info.Reason, ReasonExited)
	}
}
