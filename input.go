package agentproc

import (
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultInputQuiet is how long a process must have written nothing, while
// blocked reading its stdin, before Info.AwaitingInput is set.
const DefaultInputQuiet = 300 * time.Millisecond

// inputPoll is how often the input watcher looks at each quiet process.
// There is no kernel event for "a process blocked in read"; a process that
// is writing output is skipped without reading /proc at all.
const inputPoll = 100 * time.Millisecond

// The per-OS input layer (input_linux.go, input_nonlinux.go: fileID,
// stdinIdentity, unreadOutput, readingStdin) is part of the contract in
// platform.go.

// watchedInput is one process as the input watcher sees it: its stdin,
// its output and the pacing of its looks.
type watchedInput struct {
	p          *Process
	id         fileID
	out        *os.File // the output pipe, to see bytes not yet copied
	quiet      time.Duration
	lastTotal  int64     // output bytes at the last look
	lastChange time.Time // when lastTotal was last seen to change
	// nextLook and backoff space out /proc reads of a process whose verdict
	// stands: while it writes nothing and nobody writes its stdin, it is
	// looked at again after 100 ms, 200 ms, ... up to inputBackoffMax.
	nextLook time.Time
	backoff  time.Duration
}

// inputBackoffMax bounds how long a changed verdict about a process that
// writes nothing can go unnoticed (a quiet process that starts reading
// without printing a prompt first).
const inputBackoffMax = 2 * time.Second

// inputWatcher is a Manager's one poller of processes that may wait for
// input. It runs while such a process runs. Its zero value is ready to use.
type inputWatcher struct {
	mu      sync.Mutex
	procs   map[*Process]*watchedInput
	running bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

func (iw *inputWatcher) watch(p *Process, id fileID, out *os.File, quiet time.Duration) {
	if id == (fileID{}) {
		return // unsupported here, or no stdin
	}
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if iw.closed {
		return
	}
	if iw.procs == nil {
		iw.procs = make(map[*Process]*watchedInput)
	}
	iw.procs[p] = &watchedInput{p: p, id: id, out: out, quiet: quiet, lastChange: time.Now()}
	if !iw.running {
		iw.running = true
		iw.stop = make(chan struct{})
		iw.wg.Add(1)
		go iw.loop(iw.stop)
	}
}

func (iw *inputWatcher) close() {
	iw.mu.Lock()
	iw.closed = true
	if iw.running {
		close(iw.stop)
		iw.running = false
	}
	iw.mu.Unlock()
	iw.wg.Wait()
}

func (iw *inputWatcher) loop(stop chan struct{}) {
	defer iw.wg.Done()
	// Real time on purpose: it paces /proc reads and measures how long the
	// child was quiet, which a test's mock clock knows nothing about.
	tick := time.NewTicker(inputPoll)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		iw.mu.Lock()
		watched := make([]*watchedInput, 0, len(iw.procs))
		for p, st := range iw.procs {
			if p.exited() {
				delete(iw.procs, p)
				continue
			}
			watched = append(watched, st)
		}
		if len(watched) == 0 {
			iw.running = false
			iw.mu.Unlock()
			return
		}
		iw.mu.Unlock()
		// Only this goroutine touches their fields.
		now := time.Now()
		for _, st := range watched {
			st.look(now)
		}
	}
}

// look updates one process's AwaitingInput. Output counts as soon as the
// child wrote it, even if the reader has not copied it into the buffer yet:
// under load a prompt can sit in the pipe while the child already blocks
// in read.
func (st *watchedInput) look(now time.Time) {
	p := st.p
	if !st.quietSince(now) {
		p.setAwaitingInput(false, 0)
		return
	}
	if p.stdinWritten.Swap(false) {
		// An answer was written: the quiet period starts again from it,
		// so a process that has not yet been scheduled to read the answer
		// is not reported as still waiting.
		st.lastChange = now
		st.backoff, st.nextLook = 0, time.Time{}
	}
	if now.Sub(st.lastChange) < st.quiet || now.Before(st.nextLook) {
		return // within the quiet period or the backoff: no /proc read
	}
	st.backoff = min(max(2*st.backoff, inputPoll), inputBackoffMax)
	st.nextLook = now.Add(st.backoff)
	waiting := readingStdin(p.sup.cmd.Process.Pid, p.sup.ctr.cgroupDir(), st.id)
	// Output written while /proc was read makes the answer stale.
	if !st.quietSince(now) {
		waiting = false
	}
	p.setAwaitingInput(waiting, st.lastTotal)
}

// quietSince reports whether nothing was written since the last look, and
// otherwise records now as the last change.
func (st *watchedInput) quietSince(now time.Time) bool {
	total := st.p.buf.total()
	if total == st.lastTotal && unreadOutput(st.out) == 0 {
		return true
	}
	st.lastTotal, st.lastChange = total, now
	st.backoff, st.nextLook = 0, time.Time{}
	return false
}

// inputSignal is how WaitOutput learns that input detection changed.
type inputSignal struct {
	awaiting bool
	changed  chan struct{} // closed when awaiting next becomes true
}

// setAwaitingInput records the detector's verdict; on a change to true it
// wakes WaitOutput callers and publishes EventAwaitingInput with the last
// unfinished line of output (the prompt), rendered.
func (p *Process) setAwaitingInput(waiting bool, total int64) {
	if !p.state.setAwaitingInput(waiting) || !waiting {
		return
	}
	p.emit(Event{Type: EventAwaitingInput, Line: p.promptLine(total)})
}

// setAwaitingInput records the verdict in Info while the process runs, and
// reports whether it changed; a change to true wakes inputWait's callers.
func (st *handleState) setAwaitingInput(waiting bool) (changed bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.info.Running || st.info.AwaitingInput == waiting {
		return false
	}
	st.info.AwaitingInput = waiting
	st.inputSig.awaiting = waiting
	if waiting && st.inputSig.changed != nil {
		close(st.inputSig.changed)
		st.inputSig.changed = nil
	}
	return true
}

// inputWait returns whether the process awaits input now and, if not, a
// channel closed when it starts to.
func (st *handleState) inputWait() (bool, <-chan struct{}) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.inputSig.awaiting {
		return true, nil
	}
	if st.inputSig.changed == nil {
		st.inputSig.changed = make(chan struct{})
	}
	return false, st.inputSig.changed
}

// maxPromptBytes bounds the prompt an EventAwaitingInput carries.
const maxPromptBytes = 512

// promptLine returns the output after the last newline before total, at
// most maxPromptBytes of it, rendered.
func (p *Process) promptLine(total int64) string {
	c := p.buf.read(max(total-maxPromptBytes, 0))
	s := c.Data
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return PlainText(s)
}
