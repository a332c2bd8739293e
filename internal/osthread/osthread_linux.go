package osthread

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// lockOffMain locks the calling goroutine to its OS thread and reports
// whether that thread is the main thread, which the work of this package
// never changes (the package doc's rule).
func lockOffMain() (onMain bool) {
	runtime.LockOSThread()
	return unix.Gettid() == unix.Getpid()
}

// OnMain reports whether the calling goroutine runs on the main thread
// (a test or a caller that counts such landings asks; the work of this
// package never runs there).
func OnMain() bool { return unix.Gettid() == unix.Getpid() }

// Throwaway runs fn on an OS thread of its own that is thrown away
// afterwards, and returns fn's error. fn may change what the kernel keeps
// per thread (a Landlock domain, a seccomp filter, no_new_privs, its
// capabilities, the network or mount namespace) and then fork
// from it with cmd.Start: the child inherits the thread's state and nothing
// else in the process ever runs on that thread again, because the goroutine
// locked to it exits without unlocking, and the runtime then terminates the
// thread rather than reuse it.
//
// The one thread the runtime never terminates is the main thread (it
// wedges the goroutine's M instead of exiting it, and on some platforms the
// main thread is what the process is). A fresh goroutine can land on it: in
// the prototype 87–96 of 200 Starts did. There, this goroutine keeps the
// main thread locked (so nothing else can be scheduled on it) while a
// second fresh goroutine, which therefore runs on another thread, does the
// work; the main thread, untouched, is then kept for as long as a user
// holds it (HoldMain), so that later calls do not land there, and unlocked
// after.
//
// Go 1.28 adds Landlock to SysProcAttr; when that is the minimum, the
// Landlock step can move into the child between fork and exec, and only
// the namespaces and seccomp need this thread.
func Throwaway(fn func() error) error {
	done := make(chan error, 1)
	wake := takeWakePipe()
	// result hands back fn's error before the thread does anything else,
	// such as exit.
	result := func(err error) {
		done <- err
		if wake != nil {
			// After the result is in done, so that the reader finds it.
			_, _ = wake[1].Write([]byte{0})
		}
	}
	go func() {
		if !lockOffMain() {
			result(fn())
			return // still locked: the thread is discarded
		}
		result(offMain(fn))
		keepMain()
	}()
	if wake == nil {
		return <-done
	}
	var b [1]byte
	if _, err := wake[0].Read(b[:]); err != nil {
		// Not expected of our own pipe; the result is still in done, and
		// Close is safe against the write (the file counts its users).
		err := <-done
		_ = wake[0].Close()
		_ = wake[1].Close()
		return err
	}
	giveWakePipe(wake)
	return <-done
}

// Restored runs step, fn and step's restore on an OS thread locked to a
// goroutine of its own, and gives the thread back to the scheduler only
// when step and restore both succeeded: otherwise the thread may still be
// changed (in a tree's cgroups, say), and it ends with its goroutine,
// still locked. It returns fn's error, else restore's, else step's. Never
// on the main thread: the main thread owns the process's memory, which
// cgroup v1 charges to the owner's memory cgroup, so placed in a tree's
// cgroups it would charge the host's memory to the tree (64 MiB another
// thread touched meanwhile stayed charged to the tree after the main
// thread had left). A goroutine the runtime puts there hands the work on
// and then holds the main thread while a user holds it (HoldMain), so
// that the next calls do not land there.
func Restored(step func() (restore func() error, err error), fn func() error) error {
	done := make(chan error, 1)
	go func() {
		if !lockOffMain() {
			done <- restored(step, fn)
			return
		}
		done <- offMain(func() error { return restored(step, fn) })
		keepMain()
	}()
	return <-done
}

// restored is Restored's work on the calling goroutine's thread, which the
// caller has locked; it unlocks it only when both step and restore
// succeeded.
func restored(step func() (func() error, error), fn func() error) error {
	restore, err := step()
	if err != nil {
		// step has put the thread back or failed to: either way it is
		// not reused.
		return err
	}
	err = fn()
	if rerr := restore(); rerr != nil {
		if err == nil {
			err = rerr
		}
		return err
	}
	runtime.UnlockOSThread()
	return err
}

// ErrMainThread is what a call returns if the runtime put its worker on
// the main thread after all; it is never expected.
var ErrMainThread = errors.New("agentproc: a starting thread's confinement or cgroup placement would have changed the main thread")

// offMain is the worker of a call the runtime put on the main thread: it
// hands the work to a goroutine that cannot run here while this one holds
// the main thread. The caller keeps the main thread locked, unchanged.
func offMain(fn func() error) error {
	mainLandings.Add(1)
	inner := make(chan error, 1)
	go func() {
		if lockOffMain() {
			// Impossible while the outer goroutine holds the main
			// thread; refuse rather than change it.
			runtime.UnlockOSThread()
			inner <- ErrMainThread
			return
		}
		inner <- fn()
	}()
	return <-inner
}

// keepMain is called on the main thread, locked, once a call that landed
// there is done: the thread, untouched, is kept out of the next calls' way
// while a user holds it (HoldMain), then given back.
func keepMain() {
	gone := mainHold.keep()
	runtime.UnlockOSThread()
	if gone != nil {
		close(gone)
	}
}

// mainHold keeps the main thread locked to a parked goroutine while a user
// (a Manager that may start sandboxed processes or place a thread in
// cgroup v1) holds it. A fresh goroutine lands on the main thread whenever
// the goroutine that started it was running there, and then pays
// offMain's detour: one more goroutine on another thread and two more
// thread wake-ups. In BenchmarkSandbox a third of the sandboxed Starts
// did, and paid for it at the median (docs/measurements.md). The first
// call that lands there stays, parked, until the last user lets go
// (HoldMain), so a Manager leaves no goroutine behind. The main thread
// itself is never changed either way.
var mainHold mainThreadHold

type mainThreadHold struct {
	mu    sync.Mutex
	users int           // the holders registered by HoldMain
	held  chan struct{} // closed to give the main thread back; nil if not held
	gone  chan struct{} // closed once the holder has unlocked it
}

// mainLandings counts the calls the runtime put on the main thread, and
// spareLandings the spares among them.
var mainLandings, spareLandings atomic.Int64

// HoldMain registers a user of the main thread's hold and returns its
// release, which may be called more than once; the last user's release
// gives the main thread back.
func HoldMain() (release func()) {
	h := &mainHold
	h.mu.Lock()
	h.users++
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.users--
			if h.users == 0 && h.held != nil {
				close(h.held)
				h.held = nil
			}
		})
	}
}

// keep parks the calling goroutine, locked to the main thread, until the
// last user releases it, and returns the channel the caller closes once it
// has unlocked the thread. It returns nil at once when there is no user or
// the main thread is held already.
func (h *mainThreadHold) keep() (gone chan struct{}) {
	h.mu.Lock()
	if h.users == 0 || h.held != nil {
		h.mu.Unlock()
		return nil
	}
	held := make(chan struct{})
	gone = make(chan struct{})
	h.held, h.gone = held, gone
	h.mu.Unlock()
	<-held
	return gone
}

// The host's goroutine waits for the throwaway thread by reading a pipe
// the thread writes, not by receiving from a channel: a goroutine a
// channel wakes is queued on the waker's P, which the exiting thread holds
// until the runtime has found (or made) another thread to hand it to,
// while a goroutine parked on a read is woken by the thread the kernel
// wakes from the network poller, in parallel with the exit
// (docs/measurements.md). The pipes are kept for the next call, up to
// maxWakePipes; each use writes and reads one byte, so a kept pipe is
// empty.
const maxWakePipes = 4

var wakePipes = make(chan [2]*os.File, maxWakePipes)

// takeWakePipe returns a kept pipe or a new one; nil if none can be made,
// and then the caller waits on its channel alone.
func takeWakePipe() *[2]*os.File {
	select {
	case p := <-wakePipes:
		return &p
	default:
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	return &[2]*os.File{r, w}
}

// giveWakePipe keeps p for a later call, or closes it when enough are
// kept.
func giveWakePipe(p *[2]*os.File) {
	select {
	case wakePipes <- *p:
	default:
		_ = p[0].Close()
		_ = p[1].Close()
	}
}

// Spare is a goroutine locked to a thread made ahead and prepared, waiting
// for the one piece of work it serves (Do). Its thread runs nothing but
// the preparation, that wait and the work, and is discarded after the work
// or when the spare is discarded unused (the goroutine exits locked), as
// Throwaway's are: a changed thread never goes back to the runtime's pool.
// Use NewSpare.
type Spare struct {
	tid   int           // the thread's ID, set before ready is closed
	ready chan struct{} // closed once prepare succeeded
	fail  chan struct{} // closed if it could not be made
	work  chan func()
	quit  chan struct{} // closed to discard it unused
	once  sync.Once
}

// NewSpare makes a spare thread in the background: prepare runs on it, and
// done, if not nil, when its goroutine ends (whether the spare served, was
// discarded or failed). Never on the main thread: a goroutine the runtime
// puts there hands the spare on to one that cannot run there while it
// holds the main thread, waits until that one is ready or failed, and then
// holds the main thread while a user holds it (HoldMain), as Throwaway's
// does. A spare that gave up there instead was made again by the caller
// onto the main thread: the thread whose goroutine started it had exited
// and handed its P to the idle main thread, each time (TestSpareOnMain).
func NewSpare(prepare func() error, done func()) *Spare {
	s := &Spare{ready: make(chan struct{}), fail: make(chan struct{}),
		work: make(chan func()), quit: make(chan struct{})}
	go func() {
		if !lockOffMain() {
			s.serve(prepare, done)
			return // locked: the thread, changed, is discarded
		}
		mainLandings.Add(1)
		spareLandings.Add(1)
		go func() {
			if lockOffMain() {
				// Impossible while the outer goroutine holds the main
				// thread; refuse rather than change it.
				runtime.UnlockOSThread()
				close(s.fail)
				if done != nil {
					done()
				}
				return
			}
			s.serve(prepare, done)
		}()
		select {
		case <-s.ready:
		case <-s.fail:
		}
		keepMain()
	}()
	return s
}

// serve is the spare's life on its own thread, which the caller has locked
// and leaves locked: prepare, then the one Do or the Discard.
func (s *Spare) serve(prepare func() error, done func()) {
	if done != nil {
		defer done()
	}
	if err := prepare(); err != nil {
		close(s.fail) // the caller does the work itself and reports it
		return        // locked: a thread changed halfway is discarded
	}
	s.tid = unix.Gettid()
	close(s.ready)
	select {
	case w := <-s.work:
		w()
	case <-s.quit:
	}
}

// Ready is closed once the spare's thread is prepared.
func (s *Spare) Ready() <-chan struct{} { return s.ready }

// Failed is closed if the spare could not be made.
func (s *Spare) Failed() <-chan struct{} { return s.fail }

// TID is the spare's thread ID once Ready is closed, 0 before.
func (s *Spare) TID() int {
	select {
	case <-s.ready:
		return s.tid
	default:
		return 0
	}
}

// Do runs fn on the spare's thread, which must be ready, and returns fn's
// error; a spare serves one Do. The caller waits on a channel, not on
// Throwaway's pipe: the caller's wake-up after a spare measured the same
// at the median either way, but through the pipe its tail was many times
// longer, waiting for a thread to poll the network poller
// (docs/measurements.md).
func (s *Spare) Do(fn func() error) error {
	done := make(chan error, 1)
	s.work <- func() { done <- fn() }
	return <-done
}

// Discard throws the spare away unused; it may be called more than once.
func (s *Spare) Discard() { s.once.Do(func() { close(s.quit) }) }
