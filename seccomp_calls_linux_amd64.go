package agentproc

import "golang.org/x/sys/unix"

// seccompArchRefusedCalls are refused in every mode on amd64, beside
// seccompRefusedCalls: kexec from a file (a number not every architecture
// has), port I/O, the local descriptor table (16-bit code, a source of
// information leaks), and calls long obsolete.
var seccompArchRefusedCalls = []uint32{
	unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_MODIFY_LDT, unix.SYS_USELIB, unix.SYS__SYSCTL,
}
