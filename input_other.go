//go:build !linux

package agentproc

import "os"

// fileID is empty here: input detection needs /proc/PID/syscall, so
// Info.AwaitingInput stays false on this platform.
type fileID struct{}

func stdinIdentity(*os.File) fileID         { return fileID{} }
func readingStdin(int, string, fileID) bool { return false }
