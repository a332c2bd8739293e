//go:build !linux

package agentproc

import "os"

// fileID is empty here: input detection needs /proc/PID/syscall, so
// Info.AwaitingInput stays false on this platform.
type fileID struct{}

func stdinIdentity(*os.File) fileID         { return fileID{} }
func unreadOutput(*os.File) int             { return 0 }
func readingStdin(int, string, fileID) bool { return false }
