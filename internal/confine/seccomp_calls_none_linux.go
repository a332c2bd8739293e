//go:build !amd64 && !arm64 && !riscv64

package confine

// seccompArchRefusedCalls is empty where the filter is not written for the
// architecture (SeccompArch is 0 there and no filter is installed).
var seccompArchRefusedCalls []uint32

// seccompArchModeCalls is empty where no filter is installed.
var seccompArchModeCalls []seccompModeCall
