package agentproc

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/xerrors"
)

// DefaultOOMScoreDelta is how much higher than the host's own
// oom_score_adj the processes get by default (see WithOOMScoreDelta).
const DefaultOOMScoreDelta = 500

// maxOOMScoreAdj is the kernel's upper bound for oom_score_adj.
const maxOOMScoreAdj = 1000

// watchdog is what the supervisor watches one process for beyond Timeout:
// idleness and output size (watchOutput stops it), and an OOM kill
// (oomVerdict tells one at the exit). It is not the host guard
// (hostGuard), nor the signal gate of the OS handle.
type watchdog struct {
	idle      time.Duration // 0: no idle limit
	maxOutput int64         // 0: no output limit
	// oomBase is the host-wide OOM kill count when the process started,
	// for LikelyOOM; oomBaseOK is false where it cannot be read.
	oomBase   uint64
	oomBaseOK bool
}

// validateWatchdog checks the request fields of the idle and output
// limits the watchdog enforces.
func validateWatchdog(req Request) error {
	switch {
	case req.IdleTimeout < 0:
		return xerrors.Errorf("negative IdleTimeout %s: %w", req.IdleTimeout, ErrInvalidRequest)
	case req.IdleTimeout > 0 && (req.Stdin || req.TTY != nil) && !req.IdleInteractive:
		return xerrors.Errorf("IdleTimeout on a process with Stdin or TTY, which may be waiting for input, "+
			"needs IdleInteractive: %w", ErrInvalidRequest)
	case req.MaxOutput < 0:
		return xerrors.Errorf("negative MaxOutput %d: %w", req.MaxOutput, ErrInvalidRequest)
	}
	return nil
}

// newWatchdog makes the watchdog of a process about to be described by Start.
// The OOM baseline is a reading of the host-wide count from at most
// oomBaseMaxAge ago: a kill of this process, which ran for microseconds so
// far, is hardly in it, and a kill elsewhere just before is what makes the
// verdict "likely" rather than certain.
func (m *Manager) newWatchdog(req Request) watchdog {
	w := watchdog{idle: req.IdleTimeout, maxOutput: req.MaxOutput}
	if req.Limits.Memory == 0 {
		// With a memory limit the cgroup counts the tree's own kills (a
		// Start that cannot make one fails), so the host-wide count is
		// not needed.
		w.oomBase, w.oomBaseOK = recentHostOOMKills()
	}
	return w
}

// oomBaseMaxAge is how old a reading of the host-wide OOM kill count may be
// to serve as a new process's baseline. Reading /proc/vmstat is a sizeable
// share of a Start (docs/measurements.md); a burst of Starts shares one
// reading. An OOM kill elsewhere in the moment before a start
// can then make a later unexplained SIGKILL look likely OOM, which
// LikelyOOM's "likely" allows.
const oomBaseMaxAge = 100 * time.Millisecond

// oomSample is one reading of the host-wide OOM kill count.
type oomSample struct {
	n  uint64
	ok bool
	at time.Time // real, monotonic: this is a cache, not behaviour
}

var lastOOMSample atomic.Pointer[oomSample]

// recentHostOOMKills returns the host-wide OOM kill count as read at most
// oomBaseMaxAge ago.
func recentHostOOMKills() (uint64, bool) {
	if s := lastOOMSample.Load(); s != nil && time.Since(s.at) < oomBaseMaxAge {
		return s.n, s.ok
	}
	n, ok := hostOOMKillCount()
	lastOOMSample.Store(&oomSample{n: n, ok: ok, at: time.Now()})
	return n, ok
}

// watchOutput stops the process with ReasonOutputLimit once its output
// passes the watchdog's maxOutput, and with ReasonIdle once no output has come
// for the watchdog's idle duration on the Manager's clock. It does nothing
// without either limit.
//
// It follows the output buffer's change notifications rather than hooking
// the reader, so the copy loop is the same with a watchdog as without. The
// idle timer is made here, before Start returns, so the idle period starts
// with the process (and a mock clock's trap sees it at once); it is reset
// on every change, which a mock clock's TimerReset trap sees.
func (p *Process) watchOutput() {
	idle, maxOutput := p.sup.watchdog.idle, p.sup.watchdog.maxOutput
	if idle <= 0 && maxOutput <= 0 {
		return
	}
	var timer *quartz.Timer
	var timeout <-chan time.Time
	if idle > 0 {
		timer = p.m.cfg.clock.NewTimer(idle, "agentproc", "idle")
		timeout = timer.C
	}
	// Counted in the Manager's WaitGroup (whose count the process's own
	// supervisor holds above zero here), so Close waits for it too.
	p.m.wg.Add(1)
	go func() {
		defer p.m.wg.Done()
		if timer != nil {
			defer timer.Stop()
		}
		var seen int64
		for {
			// changed before total, so a write after the total is read
			// still wakes this loop.
			changed := p.buf.changed()
			total := p.buf.total()
			if maxOutput > 0 && total > maxOutput {
				_, _ = p.sup.stop(context.Background(), ReasonOutputLimit, time.Now())
				return
			}
			if timer != nil && total != seen {
				seen = total
				timer.Reset(idle, "agentproc", "idle")
			}
			if changed == closedChan {
				// No more output: the process is exiting.
				<-p.Done()
				return
			}
			select {
			case <-p.Done():
				return
			case <-changed:
			case <-timeout:
				// stop keeps the first reason given, so a Stop that got
				// there first still names the process's end.
				_, _ = p.sup.stop(context.Background(), ReasonIdle, time.Now())
				return
			}
		}
	}()
}

// oomVerdict tells, once the shell has exited and before the containment is
// released, whether the kernel's OOM killer ended part of the tree. oom is
// certain: the tree's cgroup counted a kill. likely is the guess made where
// the tree's own count is unknown: the shell was SIGKILLed (or, running the
// command as a child, exited with 128+9) while the host-wide count rose. The
// caller drops likely when this package sent a signal itself.
func (w *watchdog) oomVerdict(c *containment, code int, sigName string) (oom, likely bool) {
	if n, ok := treeOOMKills(c); ok {
		return n > 0, false
	}
	if !w.oomBaseOK || (sigName != "SIGKILL" && code != 128+9) {
		return false, false
	}
	n, ok := hostOOMKillCount()
	return false, ok && n > w.oomBase
}

// hostOOMKillCount is hostOOMKills, a variable so that a white-box test can
// make the count rise without an OOM kill on the test machine.
var hostOOMKillCount = hostOOMKills
