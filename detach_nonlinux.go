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

func (s *supervisor) signalDetached(Signal) error { return detachSupported() }

func (s *supervisor) stopDetached(context.Context, ExitReason) (Info, error) {
	return s.p.Info(), detachSupported()
}

func (s *supervisor) releaseDetached()                 {}
func (s *supervisor) superviseDetached()               {}
func (m *Manager) adoptDetached(*stateRecord) *Process { return nil }
