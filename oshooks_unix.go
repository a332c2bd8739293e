//go:build unix

package agentproc

import "os"

// exitStatus is the OS layer's view of the shell's exit. On Unix the wait
// status alone names the signal, so the group has nothing to add.
func (s *sysProc) exitStatus(state *os.ProcessState) (code int, signal string) {
	return exitStatus(state)
}

// beginStop is called before a stop's terminate. A process group needs
// nothing: SIGTERM means the same from Stop and from Signal.
func (s *sysProc) beginStop() {}
