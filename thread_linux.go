package agentproc

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// onThrowawayThread runs fn on an OS thread of its own that is thrown away
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
// work; the main thread, untouched, is then kept for as long as a Manager
// with a sandbox is open (mainHold), so that later calls do not land
// there, and unlocked after.
//
// Go 1.28 adds Landlock to SysProcAttr; when that is the minimum, the
// Landlock step can move into the child between fork and exec, and only
// the namespaces and seccomp need this thread.
//
// The cgroup v1 placement of issue 26 needs the same kind of thread: any
// per-thread step before a fork belongs in fn.
func onThrowawayThread(fn func() error) error {
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
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			result(fn())
			return // still locked: the thread is discarded
		}
		mainLandings.Add(1)
		result(onMainThread(fn))
		// The main thread, untouched, is kept out of the next calls' way
		// while a Manager may make them (mainHold), then given back.
		gone := mainHold.keep()
		runtime.UnlockOSThread()
		if gone != nil {
			close(gone)
		}
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

// errMainThread is what onMainThread returns if the runtime put its worker
// on the main thread after all; it is never expected.
var errMainThread = xerrors.New("agentproc: a starting thread's confinement or cgroup placement would have changed the main thread")

// onMainThread is the worker of onThrowawayThread or startOnLockedThread
// when the runtime put it on the main thread: it hands the work to a
// goroutine that cannot run here while this one holds the main thread. The
// caller keeps the main thread locked, unchanged.
func onMainThread(fn func() error) error {
	inner := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Impossible while the outer goroutine holds the main
			// thread; refuse rather than change it.
			runtime.UnlockOSThread()
			inner <- errMainThread
			return
		}
		inner <- fn()
	}()
	return <-inner
}

// mainHold keeps the main thread locked to a parked goroutine while a
// Manager that may start sandboxed processes or place a thread in cgroup v1
// (startOnLockedThread) is open. A fresh goroutine
// lands on the main thread whenever the goroutine that started it was
// running there, and then pays onMainThread's detour: one more goroutine
// on another thread and two more thread wake-ups. In BenchmarkSandbox a
// third of the sandboxed Starts did, and paid for it at the median
// (docs/measurements.md). The first call that lands there stays, parked,
// until the last such Manager closes (useMainHold), so a Manager leaves no
// goroutine behind. The main thread itself is never confined either way.
var mainHold mainThreadHold

type mainThreadHold struct {
	mu    sync.Mutex
	users int           // open Managers with a sandbox or thread placements in use
	held  chan struct{} // closed to give the main thread back; nil if not held
	gone  chan struct{} // closed once the holder has unlocked it
}

// mainLandings counts the calls the runtime put on the main thread.
var mainLandings atomic.Int64

// useMainHold registers a user of mainHold and returns its release, which
// may be called more than once; the last user's release gives the main
// thread back.
func useMainHold() (release func()) {
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
// (docs/measurements.md). The pipes are kept for the next Start, up to
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

// giveWakePipe keeps p for a later Start, or closes it when enough are
// kept.
func giveWakePipe(p *[2]*os.File) {
	select {
	case wakePipes <- *p:
	default:
		_ = p[0].Close()
		_ = p[1].Close()
	}
}
