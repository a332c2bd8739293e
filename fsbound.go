package agentproc

import (
	"sync"
	"sync/atomic"
	"time"
)

// fsBound is the one way this package makes file-system calls in a
// directory that may hang (a dead network mount, a frozen file system): the
// output log directory (logDir) and the state directory (stateDir) both go
// through it. Nobody waits for a call longer than bound: a call that has
// not returned by then is left to finish in its own goroutine, and the
// directory counts as hung until it does. While it is hung, callers that
// would wait do not, so a dead disk costs each caller at most one bound and
// most of them nothing.
//
// Work that nobody waits for (removals, the release at Close) is queued,
// which is safe under any lock, and done in order by a single goroutine
// that runs only while the queue is not empty: a hung directory holds at
// most one goroutine for it, however much is queued meanwhile.
//
// The zero value is usable once bound is set.
type fsBound struct {
	bound time.Duration

	// overdue counts the calls a caller stopped waiting for that have not
	// returned yet.
	overdue atomic.Int32
	// busySince is when the queued job in progress began (Unix
	// nanoseconds), 0 when none is.
	busySince atomic.Int64

	qmu     sync.Mutex // guards the queue; no call is made under it
	queue   []func()
	running bool          // the queue's goroutine is running
	idle    chan struct{} // closed when that goroutine stops
}

// hung reports whether a call in the directory has been running for longer
// than the bound.
func (b *fsBound) hung() bool {
	if b.overdue.Load() > 0 {
		return true
	}
	since := b.busySince.Load()
	return since != 0 && time.Since(time.Unix(0, since)) > b.bound
}

// The states of a bounded call, for the compare-and-swap that decides
// whether its caller or its own goroutine deals with the result.
const (
	callRunning int32 = iota
	callReturned
	callAbandoned
)

// call runs fn in a goroutine of its own and waits for it at most the bound.
// It reports whether fn returned in time. If it did not, the call counts as
// overdue until fn returns, and undo (if not nil) then runs in that
// goroutine, to release what fn made for a caller that is gone.
func (b *fsBound) call(fn, undo func()) bool {
	var state atomic.Int32
	done := make(chan struct{})
	go func() {
		fn()
		if !state.CompareAndSwap(callRunning, callReturned) {
			if undo != nil {
				undo()
			}
			b.overdue.Add(-1)
			return
		}
		close(done)
	}()
	return b.await(&state, done)
}

// await waits at most the bound for done, the end of a call whose goroutine
// moves state from callRunning to callReturned before closing done, or else
// finds it callAbandoned and then decrements overdue itself.
func (b *fsBound) await(state *atomic.Int32, done <-chan struct{}) bool {
	t := time.NewTimer(b.bound)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	}
	// Counted before the swap, so that the goroutine, which decrements
	// after failing its own swap, never takes overdue below zero.
	b.overdue.Add(1)
	if state.CompareAndSwap(callRunning, callAbandoned) {
		return false
	}
	b.overdue.Add(-1) // it returned just as the bound ran out
	<-done
	return true
}

// enqueue queues job for the queue's goroutine, starting it if it is not
// running. It makes no call itself, so it is safe under any lock.
func (b *fsBound) enqueue(job func()) {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	b.queue = append(b.queue, job)
	if !b.running {
		b.running = true
		b.idle = make(chan struct{})
		go b.runQueue()
	}
}

// runQueue is the queue's goroutine: it runs the jobs one by one and stops
// when none is left.
func (b *fsBound) runQueue() {
	for {
		b.qmu.Lock()
		if len(b.queue) == 0 {
			b.queue = nil
			b.running = false
			close(b.idle)
			b.qmu.Unlock()
			return
		}
		job := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		b.qmu.Unlock()

		b.busySince.Store(time.Now().UnixNano())
		job()
		b.busySince.Store(0)
	}
}

// waitIdle waits until the queue is done, at most the bound, and not at
// all while the directory hangs. It reports whether the queue is done.
func (b *fsBound) waitIdle() bool {
	b.qmu.Lock()
	idle, busy := b.idle, b.running
	b.qmu.Unlock()
	if !busy {
		return true
	}
	if b.hung() {
		return false
	}
	t := time.NewTimer(b.bound)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}
