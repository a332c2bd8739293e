// Package testleak finds processes a test run started and left running.
//
// A test binary calls Mark at the top of TestMain, before any test runs:
// it puts a variable unique to this run into the process environment, so
// every child the tests start (through exec.Command, a Manager, a shell, a
// helper re-exec) inherits it, and so do their descendants unless they
// clear their environment. After m.Run, Check lists every process that
// still carries the variable. A process is ours only if it carries this
// run's value, so parallel test binaries never see each other's children,
// and Kill signals only processes Check has found with it.
package testleak

import (
	"fmt"
	"strings"
	"time"
)

// Env is the name of the variable Mark sets.
const Env = "AGENTPROC_TEST_RUN"

// Leak is a process that carries this run's marker after the tests ended.
type Leak struct {
	PID     int
	Command string // its command line, arguments joined by spaces
	Helper  string // the helper mode it runs, if it is a test helper
}

func (l Leak) String() string {
	s := fmt.Sprintf("pid %d: %s", l.PID, l.Command)
	if l.Helper != "" {
		s += " (helper mode " + l.Helper + ")"
	}
	return s
}

// Mark sets Env to a value unique to this run and returns it.
func Mark() string { return mark() }

// Check returns the processes other than this one that carry value in Env
// once each has had up to grace to exit: children a test killed in its
// cleanup may still be on their way out, and that is not a leak. On an OS
// without /proc it returns nil.
func Check(value string, grace time.Duration) []Leak { return check(value, grace) }

// Kill sends SIGKILL to each leak's process, re-reading its environment
// first so a PID reused since Check is never signalled.
func Kill(value string, leaks []Leak) { kill(value, leaks) }

// Report formats leaks for a failure message.
func Report(leaks []Leak) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d process(es) started by the tests outlived them:", len(leaks))
	for _, l := range leaks {
		b.WriteString("\n\t" + l.String())
	}
	return b.String()
}
