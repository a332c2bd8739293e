package agentproc

import "time"

// LingerForkingThread has each forking thread wait d after it lets its
// tree go and before it ends (forkerLinger), until restore: the window
// the tree hold covers, made wide. Call it while no other test starts
// trees (not from a parallel test).
func LingerForkingThread(d time.Duration) (restore func()) {
	// A fixed wait, not a synchronisation: the window stays open for d
	// whatever the tree does, which is what the hold must cover.
	f := func() { time.Sleep(d) }
	forkerLinger.Store(&f)
	return func() { forkerLinger.Store(nil) }
}
