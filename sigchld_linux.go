package agentproc

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// sigchld is the package's one subscription to SIGCHLD, shared by every
// process of every Manager in the program (and by the detached runner):
// the kernel sends the host SIGCHLD when a child exits and when a thread
// the host traces exits (exit_notify, do_notify_parent), and this is the
// only event for the second. It starts with its first subscriber and stops
// with its last, so that a program with no process waiting has no goroutine
// of it. os/signal hands each signal to every channel notified for it, so
// another handler of SIGCHLD in the program still sees every one; a program
// that ignores SIGCHLD (signal.Ignore) is left so, and no event comes.
var sigchld struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	c    chan os.Signal // nil while no one subscribes
}

// subscribeSIGCHLD returns a channel that receives a value after each
// SIGCHLD that arrives after the call (several may fold into one), and the
// function that ends the subscription.
func subscribeSIGCHLD() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	sigchld.mu.Lock()
	if sigchld.c == nil && !signal.Ignored(syscall.SIGCHLD) {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGCHLD)
		sigchld.c = c
		sigchld.subs = map[chan struct{}]struct{}{}
		go broadcastSIGCHLD(c)
	}
	if sigchld.subs != nil {
		sigchld.subs[ch] = struct{}{}
	}
	sigchld.mu.Unlock()
	return ch, func() {
		sigchld.mu.Lock()
		delete(sigchld.subs, ch)
		var last chan os.Signal
		if len(sigchld.subs) == 0 {
			last, sigchld.c, sigchld.subs = sigchld.c, nil, nil
		}
		sigchld.mu.Unlock()
		if last != nil {
			// After Stop nothing more is sent on last: closing it ends
			// its broadcaster.
			signal.Stop(last)
			close(last)
		}
	}
}

// broadcastSIGCHLD passes each signal on c to every subscriber of c's
// time, without blocking: a subscriber with a value pending has not looked
// yet, and one look covers both signals.
func broadcastSIGCHLD(c chan os.Signal) {
	for range c {
		sigchld.mu.Lock()
		if sigchld.c == c {
			for ch := range sigchld.subs {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
		sigchld.mu.Unlock()
	}
}
