package agentproc

import (
	"runtime"

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
