package procfs

import (
	"bytes"
	"strconv"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: the kernel
// reports them in USER_HZ ticks, a fixed ABI value of 100 on every
// architecture Go runs Linux on (only alpha and ia64 used 1024), whatever
// the kernel's own HZ.
const userHZ = 100

// ParseStatCPU returns, from the contents of a /proc/PID/stat file, the
// process's state and its CPU time in nanoseconds: its own user and system
// time (fields 14 and 15) plus those of the children it has waited for
// (cutime and cstime, fields 16 and 17), which is what getrusage reports
// for a process and its waited-for children once it exits.
func ParseStatCPU(data []byte) (nanos int64, state byte, ok bool) {
	fields, ok := statFields(data, 15)
	if !ok {
		return 0, 0, false
	}
	var ticks uint64
	for _, f := range fields[11:15] {
		n, err := strconv.ParseUint(string(f), 10, 61)
		if err != nil {
			return 0, 0, false
		}
		ticks += n // four values below 2^61: no overflow
	}
	const nsPerTick = 1_000_000_000 / userHZ
	if ticks > (1<<63-1)/nsPerTick {
		return 0, 0, false
	}
	return int64(ticks) * nsPerTick, fields[0][0], true
}

// ParseStatmResident returns the resident set in pages (the second field)
// of the contents of a /proc/PID/statm file.
func ParseStatmResident(data []byte) (pages int64, ok bool) {
	fields := bytes.Fields(data)
	if len(fields) < 2 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(fields[1]), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
