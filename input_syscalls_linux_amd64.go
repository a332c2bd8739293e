package agentproc

import "golang.org/x/sys/unix"

// The older poll and select system calls, which only some architectures
// have; see readingStdin.
const (
	sysPoll   = unix.SYS_POLL
	sysSelect = unix.SYS_SELECT
)
