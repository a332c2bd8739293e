package main

import (
	"fmt"

	"github.com/agentproc/agentproc"
)

// maxOutput stops a command whose output passes it: a loop printing forever
// would otherwise run until its timeout, or forever in the background.
const maxOutput = 64 << 20

// ended says in one sentence why a process ended, where the reason alone
// would leave a model guessing: "killed: out of memory (limit 64 MiB)"
// teaches more than exit code 137. It is "" for a plain exit, a stop the
// model asked for, and a running process.
func ended(info agentproc.Info) string {
	switch {
	case info.Running:
		return ""
	case info.Reason == agentproc.ReasonOOM:
		s := "killed: out of memory"
		if info.Limits.Memory > 0 {
			s += fmt.Sprintf(" (limit %s)", mib(info.Limits.Memory))
		}
		return s + "; use less memory, for example by processing the input in parts"
	case info.LikelyOOM:
		return "killed by SIGKILL, probably because the machine ran out of memory; use less memory"
	case info.Reason == agentproc.ReasonTimeout:
		return fmt.Sprintf("stopped: it was still running when its timeout of %s passed", info.Timeout)
	case info.Reason == agentproc.ReasonIdle:
		return fmt.Sprintf("stopped: it wrote no output for %s", info.IdleTimeout)
	case info.Reason == agentproc.ReasonOutputLimit:
		return fmt.Sprintf("stopped: its output passed %s; the start and the end are kept; "+
			"redirect large output to a file and read the parts you need", mib(info.MaxOutput))
	}
	return ""
}

// mib writes n bytes in MiB, or KiB below one MiB.
func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%g KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%g MiB", float64(n)/(1<<20))
}
