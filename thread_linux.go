package agentproc

import (
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// onThrowawayThread runs fn on an OS thread of its own that is thrown away
// afterwards, and returns fn's error. fn may change what the kernel keeps
// per thread (a Landlock domain, a seccomp filter, no_new_privs, the
// capability bounding set, the network or mount namespace) and then fork
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
// work; the main thread is then unlocked untouched.
//
// Go 1.28 adds Landlock to SysProcAttr; when that is the minimum, the
// Landlock step can move into the child between fork and exec, and only
// the namespaces and seccomp need this thread.
//
// The cgroup v1 placement of issue 26 needs the same kind of thread: any
// per-thread step before a fork belongs in fn.
func onThrowawayThread(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			done <- fn()
			return // exits locked: the thread is discarded
		}
		// On the main thread: hand the work to a goroutine that cannot
		// run here while we hold it, and give the main thread back
		// unchanged.
		inner := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			if unix.Gettid() == unix.Getpid() {
				// Impossible while the outer goroutine holds the main
				// thread; refuse rather than confine it.
				runtime.UnlockOSThread()
				inner <- errMainThread
				return
			}
			inner <- fn()
		}()
		err := <-inner
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// threadPool keeps a few goroutines locked to fresh threads, waiting, so
// that a Start does not wait for the runtime to make a thread (tens of
// microseconds idle, hundreds on a loaded machine): run hands fn to one,
// which runs it and exits locked, discarding its thread as
// onThrowawayThread does, and a replacement is started off the Start
// path. Its zero value is ready; close stops the waiting ones.
type threadPool struct {
	mu     sync.Mutex
	jobs   chan threadJob
	quit   chan struct{}
	closed bool
	wg     sync.WaitGroup
}

type threadJob struct {
	fn   func() error
	done chan error
}

// spareThreads is how many threads a pool keeps waiting.
const spareThreads = 2

// run runs fn on a throwaway thread, a waiting one when there is one.
func (tp *threadPool) run(fn func() error) error {
	tp.mu.Lock()
	if tp.closed {
		tp.mu.Unlock()
		return onThrowawayThread(fn)
	}
	if tp.jobs == nil {
		tp.jobs, tp.quit = make(chan threadJob), make(chan struct{})
		for range spareThreads {
			tp.spawnLocked()
		}
	}
	jobs := tp.jobs
	tp.mu.Unlock()
	j := threadJob{fn: fn, done: make(chan error, 1)}
	select {
	case jobs <- j:
		tp.mu.Lock()
		if !tp.closed {
			tp.spawnLocked()
		}
		tp.mu.Unlock()
		return <-j.done
	default:
		// All taken (Starts in parallel): make one now.
		return onThrowawayThread(fn)
	}
}

// spawnLocked starts one waiting thread; tp.mu is held (starting a
// goroutine is not a system call).
func (tp *threadPool) spawnLocked() {
	tp.wg.Add(1)
	go tp.wait(tp.jobs, tp.quit)
}

// wait is a waiting thread's goroutine.
func (tp *threadPool) wait(jobs <-chan threadJob, quit <-chan struct{}) {
	defer tp.wg.Done()
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// Never wait on the main thread: it cannot be thrown away, and
		// holding it idle would starve a program that needs it.
		runtime.UnlockOSThread()
		tp.mu.Lock()
		if !tp.closed {
			tp.spawnLocked()
		}
		tp.mu.Unlock()
		return
	}
	select {
	case j := <-jobs:
		j.done <- j.fn()
		// Exits locked: the thread is discarded.
	case <-quit:
		// Nothing ran here: the thread goes back to the runtime intact.
		runtime.UnlockOSThread()
	}
}

// close stops the waiting threads and waits for them to exit.
func (tp *threadPool) close() {
	tp.mu.Lock()
	if !tp.closed && tp.quit != nil {
		close(tp.quit)
	}
	tp.closed = true
	tp.mu.Unlock()
	tp.wg.Wait()
}
