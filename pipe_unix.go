//go:build unix

package agentproc

import "os"

// outputPipe returns the pipe the child writes its output to. Unix pipes
// take read deadlines through the runtime poller as they are.
func outputPipe() (r, w *os.File, err error) { return os.Pipe() }

// inputPipe returns the pipe the child reads its stdin from.
func inputPipe() (r, w *os.File, err error) { return os.Pipe() }
