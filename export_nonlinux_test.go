//go:build unix && !linux

package agentproc

// ProcState cannot read a process's state here: ok is false, and the tests
// fall back to kill(pid, 0).
func ProcState(int) (state byte, ok bool) { return 0, false }
