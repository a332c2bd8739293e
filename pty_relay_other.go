//go:build unix && !aix && !darwin

package agentproc

// ptyRelay is false here: the master is made non-blocking and read through
// the runtime poller directly (see pollable). Tests set it to run the
// darwin path on Linux (TestTTYSuiteThroughRelay).
var ptyRelay = false
