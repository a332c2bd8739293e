package procfs

import (
	"bytes"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// LastPID returns the last PID the kernel handed out in our PID namespace
// (/proc/sys/kernel/ns_last_pid, Linux 3.3+). It runs after every command's
// exit, so the file is opened once and read with pread, which makes the
// kernel format the value afresh, into a stack buffer: one system call.
func LastPID() (int, bool) {
	fd, ok := lastPIDFile()
	if !ok {
		return 0, false
	}
	var buf [24]byte
	n, err := unix.Pread(fd, buf[:], 0)
	if err != nil || n <= 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	return pid, err == nil
}

// lastPIDFD is ns_last_pid opened once, for the life of the host process. A
// failure is not kept, as for rootFD.
var lastPIDFD struct {
	mu   sync.Mutex
	fd   int
	open bool
}

func lastPIDFile() (int, bool) {
	lastPIDFD.mu.Lock()
	defer lastPIDFD.mu.Unlock()
	if lastPIDFD.open {
		return lastPIDFD.fd, true
	}
	root, err := rootDir()
	if err != nil {
		return 0, false
	}
	fd, err := unix.Openat(root, "sys/kernel/ns_last_pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	lastPIDFD.fd, lastPIDFD.open = fd, true
	return fd, true
}

// ReadSys returns /proc/sys/name ("kernel/yama/ptrace_scope"), with the
// error as os.ReadFile gives it (fs.ErrNotExist where the kernel has no
// such setting).
func ReadSys(name string) ([]byte, error) { return readSys(name) }

// SysInt returns the number in /proc/sys/name ("kernel/pid_max"); ok is
// false when the file cannot be read or holds no number.
func SysInt(name string) (int, bool) {
	data, err := readSys(name)
	if err != nil {
		return 0, false
	}
	v, err := strconv.Atoi(string(bytes.TrimSpace(data)))
	return v, err == nil
}

// BootID returns /proc/sys/kernel/random/boot_id: a new random value each
// boot, "" when it cannot be read.
func BootID() string {
	data, err := readSys("kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(data))
}

// OOMKills returns the kernel's count of OOM kills since boot
// (/proc/vmstat oom_kill, Linux 4.13+).
func OOMKills() (uint64, bool) {
	data, err := os.ReadFile(Path + "/vmstat")
	if err != nil {
		return 0, false
	}
	return VMStat(data, "oom_kill")
}
