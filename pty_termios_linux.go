package agentproc

import "golang.org/x/sys/unix"

// ioctlGetTermios reads a terminal's attributes. On a PTY master Linux
// answers with the slave's, which the line discipline uses.
const ioctlGetTermios = unix.TCGETS
