package agentproc

import (
	"context"
	"time"

	"golang.org/x/xerrors"
)

func validateTimeout(d time.Duration) error {
	if d < 0 {
		return xerrors.Errorf("negative timeout %s: %w", d, ErrInvalidRequest)
	}
	return nil
}

// enforceTimeout stops the process with ReasonTimeout once d has passed on
// the Manager's clock, unless it has exited by then. d == 0 means no limit.
//
// The timer is made here, before Start returns, so its start is the
// process's start (and a mock clock's trap sees it at once). The goroutine
// that waits on it ends when the process exits, so it never outlives the
// process by more than a grace period. A clock.AfterFunc would need no
// goroutine while waiting, but its function must not block (a mock clock's
// Advance waits for it), so it would start one for the stop ladder anyway.
func (p *Process) enforceTimeout(d time.Duration) {
	if d <= 0 {
		return
	}
	timer := p.m.cfg.clock.NewTimer(d, "agentproc", "timeout")
	// Counted in the Manager's WaitGroup (whose count the process's own
	// supervisor holds above zero here), so Close waits for it too.
	p.m.wg.Add(1)
	go func() {
		defer p.m.wg.Done()
		defer timer.Stop()
		select {
		case <-p.Done():
		case <-timer.C:
			// stop keeps the first reason given, so a Stop or Close that
			// got there first still names the process's end.
			_, _ = p.sup.stop(context.Background(), ReasonTimeout, time.Now())
		}
	}()
}
