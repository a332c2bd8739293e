package agentproc

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"
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
	wake := takeWakePipe()
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			done <- fn()
		} else {
			done <- onMainThread(fn)
		}
		if wake != nil {
			// After the result is in done, so that the reader finds it.
			_, _ = wake[1].Write([]byte{0})
		}
		// Off the main thread this goroutine exits locked, and the thread
		// is discarded; onMainThread has unlocked the main thread.
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

// onMainThread is onThrowawayThread's worker when the runtime put it on the
// main thread: it hands the work to a goroutine that cannot run here while
// this one holds the main thread, and gives the main thread back
// unchanged.
func onMainThread(fn func() error) error {
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
	return err
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
