//go:build unix && !linux

package agentproc

import "os"

// outputPipe returns the pipe the child writes its output to. Unix pipes
// take read deadlines through the runtime poller as they are.
func outputPipe() (r, w *os.File, err error) { return os.Pipe() }

// inputPipe returns the pipe the child reads its stdin from.
func inputPipe() (r, w *os.File, err error) { return os.Pipe() }

// childStdin: the child of a Start without Stdin gets os/exec's own
// /dev/null.
func childStdin() *os.File { return nil }

// growPipe is a no-op where the pipe size cannot be set.
func growPipe(*os.File) {}
