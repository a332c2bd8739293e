package agentproc

import "golang.org/x/sys/unix"

// The older poll and select system calls; see readingStdin. Number 82
// (SYS_SELECT) here is the old select that takes one pointer to a block of
// arguments; the select with the arguments in registers, which C libraries
// call, is _newselect.
const (
	sysPoll   = unix.SYS_POLL
	sysSelect = unix.SYS__NEWSELECT
)
