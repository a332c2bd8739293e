package agentproc

import (
	"os"
	"os/exec"
	"syscall"

	"github.com/agentproc/agentproc/internal/procfs"
)

// Importing this package has one side effect, on Linux only: the init
// below. It looks at the environment for the variable that marks a copy of
// the host binary this package re-executed (as /proc/self/exe) to play a
// role of its own, and when it finds one it runs that role and exits, so
// that the copy never runs the host program's main. In any other process it
// reads one or two environment variables and returns. Package initialisers
// the host binary runs before this one run in the copies too (see
// docs/containment.md).
//
// The roles, each started by the file named through reexecCmd (one
// variable each, set to "1" by the starter only):
//   - the host guard (hostguard_linux.go, hostGuardEnv): kills the
//     Manager's trees when the host dies;
//   - a detached process's runner (detach_runner_linux.go, started by
//     detach_linux.go's startRunner, detachRunnerEnv): runs the shell of a
//     Request.Detach and records its output and exit.
//
// A new role is one more entry in reexecRoles, never an init of its own:
// this list is the whole of what the package does at import time.
var reexecRoles = [...]struct {
	env string
	run func() int // the role's main; its result is the exit code
}{
	{detachRunnerEnv, func() int { return runDetached(os.Args[1:]) }},
	{hostGuardEnv, func() int { return runHostGuard(os.Stdin) }},
}

func init() {
	for _, r := range reexecRoles {
		if os.Getenv(r.env) == "1" {
			os.Exit(r.run())
		}
	}
}

// reexecCmd is the one builder of a role's command line: the host binary
// (procfs.SelfExe) with name as its argv[0] (what ps shows) and args after
// it, env with the role's variable set to "1" added, in a session of its
// own, so that a ^C or SIGHUP meant for the host's terminal does not take
// the role down with the host. The caller sets the rest (files, directory)
// and starts it.
func reexecCmd(name, roleEnv string, args, env []string) *exec.Cmd {
	return &exec.Cmd{
		Path:        procfs.SelfExe,
		Args:        append([]string{name}, args...),
		Env:         append(env, roleEnv+"=1"),
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
}
