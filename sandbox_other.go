//go:build !linux && !darwin

package agentproc

import (
	"os/exec"
	"runtime"
)

// Without a sandbox mechanism (Windows, the BSDs; macOS has Seatbelt, in
// sandbox_darwin.go), nothing of a Sandbox but its environment filter
// and private temp dir can be enforced: Start fails with ErrUnsupported
// naming the field unless BestEffort is set, and then runs the command
// unconfined with the rest in Info.Warnings. Windows has no per-process
// file or network policy a child inherits without an AppContainer or a
// restricted token, which change what programs can do far beyond a policy
// (no user profile, no network by default, per-object ACLs); that is a
// project of its own.

// sandboxCache holds nothing here.
type sandboxCache struct{}

// sandboxBuilt starts commands unconfined and says what it cannot enforce.
type sandboxBuilt struct {
	info    Confinement
	missing []unenforced
}

func (c *sandboxCache) get(pol *sandboxPolicy) (*sandboxBuilt, error) {
	why := "no sandbox mechanism on " + runtime.GOOS
	b := &sandboxBuilt{info: Confinement{Network: NetworkHost}}
	b.missing = append(b.missing,
		unenforced{field: "Write", reason: why},
		unenforced{field: "Hide", reason: why})
	if pol.read != nil {
		b.missing = append(b.missing, unenforced{field: "Read", reason: why})
	}
	if pol.network != NetworkHost {
		b.missing = append(b.missing, unenforced{field: "Network", reason: why})
	}
	if len(pol.readOnly) > 0 {
		b.missing = append(b.missing, unenforced{field: "ReadOnly", reason: why, soft: true})
	}
	return b, nil
}

func (c *sandboxCache) close() {}

// sandboxThreadUser: starts here share no thread state.
func sandboxThreadUser() (release func()) { return func() {} }

func (b *sandboxBuilt) done() {}

// readyThread: no thread is made ahead here.
type readyThread struct{}

func (b *sandboxBuilt) takeReady() (*readyThread, string) { return nil, "" }

// ownCgroupNS is false: prepare gives no cgroup here.
func (b *sandboxBuilt) ownCgroupNS() bool { return false }

func (st *readyThread) discard() {}

func (c *sandboxCache) supplyTemps(string, func() (string, error), func(string)) {}

func (b *sandboxBuilt) start(cmd *exec.Cmd, _ sandboxStart) error {
	return cmd.Start()
}

func sandboxSupport() SandboxFeatures {
	return SandboxFeatures{
		Networks: []Network{NetworkHost},
		Missing:  []string{"no sandbox mechanism on " + runtime.GOOS + ": only the environment filter and the private temp dir"},
	}
}

// recycleTempDir leaves dir where it is, to be removed: no temp dir is
// reused here.
func recycleTempDir(dir string) (string, bool) { return dir, false }

// tempParentBase: the temp parent is made in os.TempDir().
func tempParentBase() string { return "" }
