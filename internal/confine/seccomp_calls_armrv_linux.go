//go:build arm64 || riscv64

package confine

import "golang.org/x/sys/unix"

// seccompArchRefusedCalls are refused in every mode on arm64 and riscv64,
// beside seccompRefusedCalls: kexec from a file, a number not every
// architecture has. They have no port I/O, LDT or uselib calls.
var seccompArchRefusedCalls = []uint32{unix.SYS_KEXEC_FILE_LOAD}

// seccompArchModeCalls is empty on arm64 and riscv64: every call that takes
// a file mode there is in seccompModeCalls.
var seccompArchModeCalls []seccompModeCall
