package agentproc

import (
	"bytes"
	"os"
	"strconv"
)

// countGroup counts the live (non-zombie) processes whose process group is
// pgid, from /proc; ok is false when /proc cannot be read. Zombies do not
// count: a killed member whose parent died waits for init to reap it, and
// it neither runs nor holds files.
func countGroup(pgid int) (n int, ok bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pgrp, found := readStat(pid)
		if found && pgrp == pgid && state != 'Z' {
			n++
		}
	}
	return n, true
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
