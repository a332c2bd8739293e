package agentproc

import (
	"os/exec"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// startCommand starts cmd. Two parts of a start act on the starting thread
// itself, and they share one locked OS thread: the containment's cgroup v1
// thread placement (the leader is born in the cgroups of the thread that
// forks it; prepareThread) and the sandbox (namespaces, Landlock, seccomp;
// sandbox_linux.go), which runs its steps on a thread thrown away after the
// start, and prepareThread's before them. Without a sandbox the placement
// runs on a thread locked to a goroutine of its own and moved back after
// the start.
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
	} else {
		err = startOnLockedThread(cmd, step)
	}
	// restoreFailed was set on the thread, before the result came back.
	if restoreFailed && cmd.Process != nil {
		c.cg.Kill()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	return err
}

// startOnLockedThread runs step, cmd.Start and step's restore on an OS
// thread locked to a goroutine of its own, and gives the thread back to
// the scheduler only when restore succeeded. Never on the main thread: the
// main thread owns the process's memory, which cgroup v1 charges to the
// owner's memory cgroup, so placed in a tree's cgroups it would charge the
// host's memory to the tree (64 MiB another thread touched meanwhile stayed
// charged to the tree after the main thread had left). A goroutine the
// runtime puts there hands the work on (onMainThread) and then holds the
// main thread while the Manager is open (mainHold), so that the next
// placements do not land there.
func startOnLockedThread(cmd *exec.Cmd, step threadStep) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			done <- placeAndStart(cmd, step)
			return
		}
		mainLandings.Add(1)
		done <- onMainThread(func() error { return placeAndStart(cmd, step) })
		// As onThrowawayThread does: kept out of the next placements' way
		// while the Manager is open (mainHold), then given back.
		gone := mainHold.keep()
		runtime.UnlockOSThread()
		if gone != nil {
			close(gone)
		}
	}()
	return <-done
}

// placeAndStart runs step, cmd.Start and step's restore on the calling
// goroutine's thread, which the caller has locked, and unlocks it only
// when both step and restore succeeded: otherwise the thread may be in a
// tree's cgroups, and it ends with the goroutine, still locked.
func placeAndStart(cmd *exec.Cmd, step threadStep) error {
	restore, err := step()
	if err != nil {
		// step has put the thread back or failed to: either way it is
		// not reused.
		return err
	}
	err = cmd.Start()
	if rerr := restore(); rerr != nil {
		if err == nil {
			err = rerr
		}
		return err
	}
	runtime.UnlockOSThread()
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
	if unix.Gettid() == unix.Getpid() {
		mainPlacements.Add(1)
	}
	return leave, nil
}

// placements counts the thread placements, mainPlacements those that
// placed the main thread, which startOnLockedThread never lets happen.
var placements, mainPlacements atomic.Int64
