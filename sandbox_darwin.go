package agentproc

import (
	"os"
	"os/exec"
	"sync"
)

// On macOS the shell runs under sandbox-exec(1) with a Seatbelt profile
// generated from the policy (seatbelt.go), as Codex and Claude Code run
// their commands. Unverified: this project's tests have never run it on a
// Mac (docs/sandbox.md says so); the profile has golden tests on every OS.
// sandbox-exec is deprecated by Apple but present on every release so far.

const sandboxExec = "/usr/bin/sandbox-exec"

// sandboxCache holds the profiles, one per distinct policy.
type sandboxCache struct {
	mu       sync.Mutex
	profiles map[string]*sandboxBuilt
}

// sandboxBuilt is one policy's profile.
type sandboxBuilt struct {
	profile string
	info    Confinement
	missing []unenforced
}

func (c *sandboxCache) get(pol *sandboxPolicy) (*sandboxBuilt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.profiles[pol.key]; b != nil {
		return b, nil
	}
	b := &sandboxBuilt{profile: seatbeltProfile(pol), info: Confinement{Network: pol.network, Mechanisms: []string{"seatbelt"}}}
	if _, err := os.Stat(sandboxExec); err != nil {
		b.info.Mechanisms = nil
		for _, f := range []string{"Write", "Hide", "Network"} {
			b.missing = append(b.missing, unenforced{field: f, reason: sandboxExec + " is missing"})
		}
	}
	if pol.network == NetworkLoopback {
		b.missing = append(b.missing, unenforced{field: "Network", reason: "a private loopback needs a network namespace, which macOS does not have"})
	}
	if pol.network == NetworkHosts {
		b.missing = append(b.missing, unenforced{field: "AllowHosts", reason: "the host allowlist is Linux only: the tree gets no network"})
	}
	if c.profiles == nil {
		c.profiles = map[string]*sandboxBuilt{}
	}
	if len(c.profiles) < 64 {
		c.profiles[pol.key] = b
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

// start runs cmd's program under sandbox-exec with the profile.
// No thread step exists on macOS (startCommand passes none).
func (b *sandboxBuilt) start(cmd *exec.Cmd, _ sandboxStart) error {
	if b.info.Mechanisms != nil {
		cmd.Args = append([]string{sandboxExec, "-p", b.profile, cmd.Path}, cmd.Args[1:]...)
		cmd.Path = sandboxExec
	}
	return cmd.Start()
}

func sandboxSupport() SandboxFeatures {
	f := SandboxFeatures{Networks: []Network{NetworkHost, NetworkNone, NetworkPorts}}
	if _, err := os.Stat(sandboxExec); err != nil {
		f.Missing = append(f.Missing, sandboxExec+" is missing")
		return f
	}
	f.Supported = true
	f.Mechanisms = []string{"seatbelt"}
	f.Missing = append(f.Missing, "loopback: no network namespaces on macOS", "the Seatbelt profile is unverified (never run in this project's tests)")
	return f
}

// recycleTempDir leaves dir where it is, to be removed: no temp dir is
// reused here.
func recycleTempDir(dir string) (string, bool) { return dir, false }

// tempParentBase: the temp parent is made in os.TempDir().
func tempParentBase() string { return "" }
