package cgroup

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// The interface files are read and written with plain system calls, not
// through os.File: cgroup files are pollable, so os.Open registers each
// with the Go poller and Close takes it out again, which cost more than
// the read or write itself (Start+Wait with Limits touches a dozen files).

// openFile opens file, retrying when a signal interrupts it.
func openFile(file string, flags int) (int, error) {
	for {
		fd, err := unix.Open(file, flags|unix.O_CLOEXEC, 0o644)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: file, Err: err}
		}
		return fd, nil
	}
}

// readFile reads a whole interface file.
func readFile(file string) ([]byte, error) {
	fd, err := openFile(file, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: file, Err: err}
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// writeAll writes value to the open interface file fd in one write, as
// the kernel expects of them.
func writeAll(fd int, value []byte) error {
	for {
		_, err := unix.Write(fd, value)
		if err != unix.EINTR {
			return err
		}
	}
}

// writeBytes writes value into file, opened as os.WriteFile would (so
// that the tests that lay out a cgroup in plain files see the same).
func writeBytes(file string, value []byte) error {
	fd, err := openFile(file, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := writeAll(fd, value); err != nil {
		return &os.PathError{Op: "write", Path: file, Err: err}
	}
	return nil
}

// preadAll reads the whole of the open interface file fd from its start:
// the kernel makes a cgroup file's content anew for a read at offset 0, so
// one open file serves any number of reads.
func preadAll(fd int) ([]byte, error) {
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := unix.Pread(fd, buf[len(buf):cap(buf)], int64(len(buf)))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// readPIDs reads a cgroup.procs or tasks file.
func readPIDs(file string) []int {
	data, err := readFile(file)
	if err != nil {
		return nil
	}
	return parsePIDs(data)
}

// parsePIDs parses a cgroup.procs or tasks file.
func parsePIDs(data []byte) []int {
	var pids []int
	for line := range strings.Lines(string(data)) {
		if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readInt reads a file that holds one number.
func readInt(file string) (int64, bool) {
	data, err := readFile(file)
	if err != nil {
		return 0, false
	}
	return parseInt(data)
}

func parseInt(data []byte) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n, err == nil
}

// readKeyed reads the value of key in a flat-keyed file such as cpu.stat
// or memory.oom_control.
func readKeyed(file, key string) (int64, bool) {
	data, err := readFile(file)
	if err != nil {
		return 0, false
	}
	return parseKeyed(data, key)
}

// parseKeyed is readKeyed for content already read.
func parseKeyed(data []byte, key string) (int64, bool) {
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// listFile reads a space-separated list file such as cgroup.controllers; a
// missing file is an empty list.
func listFile(file string) map[string]bool {
	set := make(map[string]bool)
	if data, err := readFile(file); err == nil {
		for _, f := range strings.Fields(string(data)) {
			set[f] = true
		}
	}
	return set
}

// listNames renders a set as a sorted space-separated list.
func listNames(set map[string]bool) string {
	return strings.Join(slices.Sorted(maps.Keys(set)), " ")
}

func exists(file string) bool {
	var st unix.Stat_t
	return unix.Stat(file, &st) == nil
}

// writeFile writes value into the interface file name of the cgroup dir.
func writeFile(dir, name, value string) error {
	if err := writeBytes(filepath.Join(dir, name), []byte(value)); err != nil {
		return xerrors.Errorf("set %s of cgroup %q to %s: %w", name, dir, value, err)
	}
	return nil
}
