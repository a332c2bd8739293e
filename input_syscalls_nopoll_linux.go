//go:build linux && !amd64 && !386

package agentproc

// This architecture has only ppoll and pselect6; -1 matches no system call.
const (
	sysPoll   = -1
	sysSelect = -1
)
