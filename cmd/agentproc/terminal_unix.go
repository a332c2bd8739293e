//go:build unix

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// fileIsTerminal asks for f's window size, which only a terminal has.
func fileIsTerminal(f *os.File) bool {
	sc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var werr error
	if err := sc.Control(func(fd uintptr) {
		_, werr = unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ)
	}); err != nil {
		return false
	}
	return werr == nil
}
