//go:build unix && !linux

package agentproc_test

import "context"

// waitExit reports that this OS has no exit event for a process that is not
// our child (kqueue's EVFILT_PROC would do, but is not wired up here): the
// caller polls instead.
func waitExit(context.Context, int) (exited, ok bool) { return false, false }
