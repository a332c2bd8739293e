package cgroup

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/xerrors"
)

// readPIDs reads a cgroup.procs or tasks file.
func readPIDs(file string) []int {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
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
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n, err == nil
}

// readKeyed reads the value of key in a flat-keyed file such as cpu.stat
// or memory.oom_control.
func readKeyed(file, key string) (int64, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
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
	if data, err := os.ReadFile(file); err == nil {
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
	_, err := os.Stat(file)
	return err == nil
}

// writeFile writes value into the interface file name of the cgroup dir.
func writeFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil {
		return xerrors.Errorf("set %s of cgroup %q to %s: %w", name, dir, value, err)
	}
	return nil
}
