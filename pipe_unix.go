//go:build unix

package agentproc

import "os"

// inputPipe returns the pipe the child reads its stdin from.
func inputPipe() (r, w *os.File, err error) { return os.Pipe() }
