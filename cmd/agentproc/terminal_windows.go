package main

import (
	"os"

	"golang.org/x/sys/windows"
)

// fileIsTerminal asks for f's console mode, which only a console has.
func fileIsTerminal(f *os.File) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) == nil
}
