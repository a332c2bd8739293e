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
// only event for the second. Its broadcaster starts with its first
// subscriber and ends with its last, so that a program with no process
// waiting has no goroutine of it. The os/signal registration is made once
// and kept: a process whose output ended before its exit was reported
// subscribes until it is (reapTracedThreads; a running process with its
// output open does not: TestRunningProcessesAskNothingAtSIGCHLD), and
// signal.Stop, which waits for the signal handler to be idle, cost 55 to
// 100 µs each time the last subscriber left, against 1.5 µs for a
// subscription with the registration kept (measured on 6.18, 2 CPUs). os/signal hands each signal
// to every channel notified for it, so another handler of SIGCHLD in the
// program still sees every one; a program that ignores SIGCHLD
// (signal.Ignore) is left so, and no event comes.
var sigchld struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	c    chan os.Signal // notified from the first subscription on, never stopped
	done chan struct{}  // ends the broadcaster; nil while no one subscribes
}

// subscribeSIGCHLD returns a channel that receives a value after each
// SIGCHLD that arrives after the call (several may fold into one, and one
// may come that arrived before), and the function that ends the
// subscription.
func subscribeSIGCHLD() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	sigchld.mu.Lock()
	if sigchld.done == nil && !signal.Ignored(syscall.SIGCHLD) {
		if sigchld.c == nil {
			sigchld.c = make(chan os.Signal, 1)
		}
		// Again at each start, cheap once registered: a signal.Ignore
		// since the last one cancelled it, and a signal.Reset after that
		// lets it be made again.
		signal.Notify(sigchld.c, syscall.SIGCHLD)
		sigchld.done = make(chan struct{})
		sigchld.subs = map[chan struct{}]struct{}{}
		go broadcastSIGCHLD(sigchld.c, sigchld.done)
	}
	if sigchld.subs != nil {
		sigchld.subs[ch] = struct{}{}
	}
	sigchld.mu.Unlock()
	return ch, func() {
		sigchld.mu.Lock()
		delete(sigchld.subs, ch)
		if len(sigchld.subs) == 0 && sigchld.done != nil {
			close(sigchld.done)
			sigchld.done, sigchld.subs = nil, nil
		}
		sigchld.mu.Unlock()
	}
}

// broadcastSIGCHLD passes each signal on c to every subscriber of the
// moment, without blocking: a subscriber with a value pending has not
// looked yet, and one look covers both signals. A signal read after done
// was closed goes to the subscribers of the next broadcaster, if any: it
// may have arrived after their subscription.
func broadcastSIGCHLD(c <-chan os.Signal, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-c:
		}
		sigchld.mu.Lock()
		for ch := range sigchld.subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		sigchld.mu.Unlock()
	}
}
