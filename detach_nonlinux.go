//go:build !linux

package agentproc

import (
	"context"
	"runtime"

	"golang.org/x/xerrors"
)

// Request.Detach needs the runner and pidfds of detach_linux.go. On Windows
// a detached process would need a Job Object without kill-on-close and an
// adoption path through process handles, which do not exist yet.

func detachSupported() error {
	return xerrors.Errorf("detached processes need Linux, this is %s: %w", runtime.GOOS, ErrUnsupported)
}

type detached struct{}

func (m *Manager) startDetached(Request, string, string, string, uint64, []string) (*Process, error) {
	return nil, detachSupported()
}

func (p *Process) signalDetached(Signal) error { return detachSupported() }

func (p *Process) stopDetached(context.Context, ExitReason) (Info, error) {
	return p.Info(), detachSupported()
}

func (p *Process) releaseDetached()                    {}
func (p *Process) superviseDetached()                  {}
func (m *Manager) adoptDetached(*stateRecord) *Process { return nil }
