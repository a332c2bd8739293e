package procfs

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// StartTime returns the start time and state of pid from /proc/PID/stat
// (ParseStatStart), without a Scanner: it is read with bare system calls
// into a stack buffer, since os.ReadFile's stat and second read double the
// cost of a file that fits in one read.
func StartTime(pid int) (start uint64, state byte, ok bool) {
	if pid <= 0 {
		return 0, 0, false
	}
	fd, err := unix.Open(PIDFile(pid, "stat"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	var buf [1024]byte
	n, err := unix.Read(fd, buf[:])
	_ = unix.Close(fd)
	if err != nil || n <= 0 {
		return 0, 0, false
	}
	return ParseStatStart(buf[:n])
}

// Children lists the children of every thread of pid
// (/proc/PID/task/TID/children, Linux 3.5+ with CONFIG_PROC_CHILDREN).
func Children(pid int) []int {
	dir := PIDFile(pid, "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var kids []int
	for _, t := range tasks {
		data, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(data) {
			if k, err := strconv.Atoi(string(f)); err == nil {
				kids = append(kids, k)
			}
		}
	}
	return kids
}

// Descendants returns leader and every process below it (Children, level
// by level), at most the first 4096 processes' children.
func Descendants(leader int) []int {
	out := []int{leader}
	for i := 0; i < len(out) && i < 4096; i++ {
		out = append(out, Children(out[i])...)
	}
	return out
}

// FDFile returns the device and inode of the file pid's descriptor fd is
// open on (a stat through /proc/PID/fd/FD); ok is false when that cannot
// be read.
func FDFile(pid, fd int) (dev, ino uint64, ok bool) {
	var st unix.Stat_t
	if err := unix.Stat(Path+"/"+strconv.Itoa(pid)+"/fd/"+strconv.Itoa(fd), &st); err != nil {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true
}

// SetOOMScoreAdj writes value to /proc/PID/oom_score_adj.
func SetOOMScoreAdj(pid int, value []byte) error {
	root, err := rootDir()
	if err != nil {
		return err
	}
	fd, err := unix.Openat(root, strconv.Itoa(pid)+"/oom_score_adj", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = unix.Write(fd, value)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}

// NetTableDirs returns, for each network namespace one of pids is in, a
// directory (ending in "/") whose socket tables (tcp, tcp6, udp, udp6; see
// ParseSocketTable) are that namespace's: /proc/net/ for this process's
// own, /proc/PID/net/ for another. A PID whose namespace cannot be read
// counts as in ours.
func NetTableDirs(pids map[int]bool) []string {
	own, _ := os.Readlink(SelfFile("ns/net"))
	seen := map[string]bool{}
	var dirs []string
	for pid := range pids {
		ns, err := os.Readlink(PIDFile(pid, "ns/net"))
		dir := PIDFile(pid, "net/")
		if err != nil || ns == own {
			ns, dir = own, Path+"/net/"
		}
		if !seen[ns] {
			seen[ns] = true
			dirs = append(dirs, dir)
		}
	}
	return dirs
}
