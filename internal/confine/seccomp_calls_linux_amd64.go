package confine

import "golang.org/x/sys/unix"

// seccompArchRefusedCalls are refused in every mode on amd64, beside
// seccompRefusedCalls: kexec from a file (a number not every architecture
// has), port I/O, the local descriptor table (16-bit code, a source of
// information leaks), and calls long obsolete.
var seccompArchRefusedCalls = []uint32{
	unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_MODIFY_LDT, unix.SYS_USELIB, unix.SYS__SYSCTL,
}

// seccompArchModeCalls take a file mode on amd64 beside seccompModeCalls:
// the calls arm64 and riscv64 have only in their *at form.
var seccompArchModeCalls = []seccompModeCall{
	{unix.SYS_CHMOD, 1, -1}, {unix.SYS_CREAT, 1, -1}, {unix.SYS_MKNOD, 1, -1}, {unix.SYS_OPEN, 2, 1},
}
