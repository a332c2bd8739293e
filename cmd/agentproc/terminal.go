package main

import (
	"io"
	"os"
)

// isTerminal reports whether r is a terminal (a console on Windows), where
// a person may answer a question. /dev/null, a character device too, is not
// one. Each OS file provides fileIsTerminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && fileIsTerminal(f)
}
