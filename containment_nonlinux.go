//go:build !linux

package agentproc

import (
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/xerrors"
)

// containment is the process group alone here: there is no /proc
// environment to sweep and no cgroup, so processes that leave the group
// (setsid, double forks) are not reached. See docs/containment.md.
type containment struct{}

func newContainment(_ string, cfg *config, _ Limits, _ *cgroupSetClaim) (*containment, error) {
	if cfg.cgroupParent != "" {
		return nil, xerrors.Errorf("cgroup parent %q: cgroup containment needs Linux, this is %s: %w",
			cfg.cgroupParent, runtime.GOOS, ErrUnsupported)
	}
	return &containment{}, nil
}

// cgroupSetPool, cgroupSetClaim: there are no cgroups to make ahead here.
type (
	cgroupSetPool  struct{}
	cgroupSetClaim struct{}
)

func (*cgroupSetPool) take(string, *config, Limits) (string, *cgroupSetClaim) {
	return uuid.NewString(), nil
}
func (*cgroupSetPool) close()              {}
func (*cgroupSetPool) setGuard(*hostGuard) {}
func (*cgroupSetClaim) discard()           {}

func (*containment) prepare() int            { return -1 }
func (*containment) describe() string        { return "" }
func (*containment) cgroupDir() string       { return "" }
func (*containment) started(*exec.Cmd) error { return nil }
func (*containment) terminate(time.Time)     {}
func (*containment) reaped()                 {}
func (*containment) killEscaped() int        { return 0 }
func (*containment) release() error          { return nil }
func (*containment) removeCgroups() bool     { return false }
func (*containment) needsThread() bool       { return false }

// startCommand starts cmd, confined by sbx when it is not nil: no
// containment here acts on the starting thread.
func startCommand(cmd *exec.Cmd, _ *containment, sbx *sandboxRun) error {
	if sbx == nil {
		return cmd.Start()
	}
	return sbx.start(cmd, nil)
}

// cgroupEscapeWarning is never called here: prepare gives no cgroup.
func cgroupEscapeWarning(bool) string { return "" }

// startInCgroup is never called here: prepare gives no cgroup.
func startInCgroup(*syscall.SysProcAttr, int, bool) error { return ErrUnsupported }

func (*containment) usage(cpu time.Duration, rss int64) (time.Duration, int64, bool) {
	return cpu, rss, false
}

// foreignProc is false: only Linux reads /proc.
func foreignProc() bool { return false }

// prepareStops does nothing: there is no sweep to prepare.
func prepareStops(*config, time.Time) {}
