package agentproc

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
)

// The tests re-run this test binary as a predictable child (the
// helper-process pattern of os/exec's tests). This is the one registry of
// those children, for every OS and for both the white-box and the black-box
// tests: a test asks for a mode with UseHelper and puts HelperEnv=mode in
// the child's environment; TestMain (manager_test.go) runs that mode's main
// instead of the tests when the variable is set, and, after a full run,
// fails if a registered mode was never asked for, so a helper cannot
// outlive the tests that needed it.

// helperEnv names the helper mode a child of the test binary runs.
const helperEnv = "AGENTPROC_TEST_HELPER"

type helperMode struct {
	main func() int
	// bench marks a mode only benchmarks use; it is not expected to be
	// used by a run of the tests.
	bench bool
}

var (
	helpersMu   sync.Mutex
	helpers     = map[string]helperMode{}
	helpersUsed = map[string]bool{}
)

// registerHelper adds a mode; registering a name twice is a bug.
func registerHelper(name string, main func() int, bench bool) {
	helpersMu.Lock()
	defer helpersMu.Unlock()
	if _, ok := helpers[name]; ok {
		panic("helper mode registered twice: " + name)
	}
	helpers[name] = helperMode{main: main, bench: bench}
}

// useHelper records that a test runs mode and returns it, for the value of
// helperEnv. An unregistered mode is a bug in the test.
func useHelper(mode string) string {
	helpersMu.Lock()
	defer helpersMu.Unlock()
	if _, ok := helpers[mode]; !ok {
		panic("unknown helper mode: " + mode)
	}
	helpersUsed[mode] = true
	return mode
}

// runHelperIfAsked runs the helper mode the environment names and exits;
// without one it returns.
func runHelperIfAsked() {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	helpersMu.Lock()
	h, ok := helpers[mode]
	helpersMu.Unlock()
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		os.Exit(2)
	}
	os.Exit(h.main())
}

// unusedHelpers lists the modes no test asked for in this run. It is only
// meaningful after a run of every test (no -run, -skip or -short); then
// the benchmark-only modes are left out.
func unusedHelpers() []string {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return nil
		}
	}
	if testing.Short() {
		return nil
	}
	helpersMu.Lock()
	defer helpersMu.Unlock()
	var unused []string
	for name, h := range helpers {
		if !h.bench && !helpersUsed[name] {
			unused = append(unused, name)
		}
	}
	slices.Sort(unused)
	return unused
}

// Exported to the black-box tests in package agentproc_test.
const HelperEnv = helperEnv

var (
	RegisterHelper   = registerHelper
	UseHelper        = useHelper
	RunHelperIfAsked = runHelperIfAsked
	UnusedHelpers    = unusedHelpers
)
