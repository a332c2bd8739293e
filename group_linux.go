package agentproc

import (
	"bytes"
	"os"
	"strconv"
)

// countGroup counts the live (non-zombie) processes whose process group is
// pgid, from /proc.
func countGroup(pgid int) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 1
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pgrp, ok := readStat(pid)
		if ok && pgrp == pgid && state != 'Z' {
			n++
		}
	}
	return max(n, 1)
}

// readStat returns the state and process group fields of /proc/PID/stat.
func readStat(pid int) (state byte, pgrp int, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	return parseStat(data)
}

// parseStat returns the state and process group fields of the contents of
// a /proc/PID/stat file.
func parseStat(data []byte) (state byte, pgrp int, ok bool) {
	// The command name (field 2) may contain spaces and parentheses, so the
	// fixed fields are read after its last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := bytes.Fields(data[i+1:])
	// fields: state, ppid, pgrp, ...
	if len(fields) < 3 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err := strconv.Atoi(string(fields[2]))
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], pgrp, true
}
