package agentproc

import (
	"os/exec"
	"sync/atomic"

	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/osthread"
)

// startCommand starts cmd. Two parts of a start act on the starting thread
// itself, and they share one locked OS thread: the containment's cgroup v1
// thread placement (the leader is born in the cgroups of the thread that
// forks it; prepareThread) and the sandbox (namespaces, Landlock, seccomp;
// sandbox_linux.go), which runs its steps on a thread thrown away after the
// start, and prepareThread's before them. Without a sandbox the placement
// runs on a thread locked to a goroutine of its own and moved back after
// the start (osthread.Restored): never the main thread, which owns the
// process's memory, and which cgroup v1 would then charge to the tree.
//
// If the thread cannot be moved back, it is never handed back to the Go
// scheduler (its goroutine ends still locked, which ends the thread, so no
// other goroutine ever runs inside the tree's cgroups), and the tree just
// started is killed: its pids.max may not have been lowered.
func startCommand(cmd *exec.Cmd, c *containment, sbx *sandboxRun) error {
	if sbx == nil && !c.needsThread() {
		return cmd.Start()
	}
	var step threadStep
	restoreFailed := false
	if c.needsThread() {
		step = func() (func() error, error) {
			restore, err := prepareThread(c)
			if err != nil {
				return nil, err
			}
			return func() error {
				if err := restore(); err != nil {
					restoreFailed = true
					return xerrors.Errorf("restore the starting thread: %w", err)
				}
				return nil
			}, nil
		}
	}
	var err error
	if sbx != nil {
		err = sbx.start(cmd, step)
		if err == nil {
			c.inMountns(sbx.mountns)
		}
	} else {
		err = osthread.Restored(step, cmd.Start)
	}
	// restoreFailed was set on the thread, before the result came back.
	if restoreFailed && cmd.Process != nil {
		c.cg.Kill()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	return err
}

// prepareThread readies the calling, locked OS thread for the start and
// returns the step that undoes it: the containment's thread placement.
func prepareThread(c *containment) (restore func() error, err error) {
	leave, err := c.enterThread()
	if err != nil {
		return nil, xerrors.Errorf("place the starting thread: %w", err)
	}
	placements.Add(1)
	if osthread.OnMain() {
		mainPlacements.Add(1)
	}
	return leave, nil
}

// placements counts the thread placements, mainPlacements those that
// placed the main thread, which osthread never lets happen.
var placements, mainPlacements atomic.Int64
