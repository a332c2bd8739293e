package agentproc

import (
	"os/exec"
	"runtime"

	"golang.org/x/xerrors"
)

// startCommand starts cmd. When the tree's containment has to act on the
// starting thread itself (cgroup v1 thread placement: the leader is born
// in the cgroups of the thread that forks it), the start runs on an OS
// thread locked to a goroutine of its own, between prepareThread and the
// step it returns. Other per-thread preparations belong in prepareThread
// too, so that one locked thread serves them all.
//
// If the thread cannot be restored, it is never handed back to the Go
// scheduler: its goroutine ends still locked, which ends the thread, so
// no other goroutine ever runs inside the tree's cgroups.
func startCommand(cmd *exec.Cmd, c *containment) error {
	if !c.needsThread() {
		return cmd.Start()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restore, err := prepareThread(c)
		if err != nil {
			// prepareThread has put the thread back or failed to: either
			// way it is not reused.
			done <- err
			return
		}
		err = cmd.Start()
		if rerr := restore(); rerr != nil {
			if err == nil {
				err = xerrors.Errorf("restore the starting thread: %w", rerr)
				c.cg.Kill()
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			done <- err
			return // still locked: the thread ends with the goroutine
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// prepareThread readies the calling, locked OS thread for the start and
// returns the step that undoes it: the containment's thread placement.
func prepareThread(c *containment) (restore func() error, err error) {
	leave, err := c.enterThread()
	if err != nil {
		return nil, xerrors.Errorf("place the starting thread: %w", err)
	}
	return leave, nil
}
