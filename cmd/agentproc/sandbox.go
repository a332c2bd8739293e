package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentproc/agentproc"
)

// The --sandbox and --network values.
const (
	sandboxWorkspace = "workspace"
	sandboxNone      = "none"
)

// sandboxPolicy returns the policy the flags ask for, nil for none.
// defaultOn makes an unset --sandbox mean workspace where this host
// supports the sandbox (mcp), else none (serve, whose default work dir is
// the home directory, which holds the credentials the workspace policy
// hides).
func (m *managerFlags) sandboxPolicy(defaultOn bool) (*agentproc.Sandbox, error) {
	mode := m.sandbox
	if mode == "" {
		mode = sandboxNone
		if defaultOn && agentproc.SandboxSupport().Supported {
			mode = sandboxWorkspace
		}
	}
	switch mode {
	case sandboxNone:
		if m.network != "" || len(m.hosts) > 0 {
			return nil, usagef("--network and --allow-host need --sandbox=workspace")
		}
		return nil, nil
	case sandboxWorkspace:
	default:
		return nil, usagef("--sandbox=%s: want workspace or none", mode)
	}
	if m.workdir == "" {
		return nil, usagef("--sandbox=workspace needs --workdir")
	}
	network := agentproc.Network(m.network)
	if len(m.hosts) > 0 && (network == "" || network == agentproc.NetworkHosts) {
		sb := agentproc.WorkspaceSandbox(m.workdir)
		sb.Network, sb.AllowHosts = agentproc.NetworkHosts, slices.Clone(m.hosts)
		if err := sb.Validate(); err != nil {
			return nil, usagef("--allow-host: %v", err)
		}
		return m.hideStateDir(sb), nil
	}
	if len(m.hosts) > 0 || network == agentproc.NetworkHosts {
		return nil, usagef("--allow-host goes with --network=hosts (or no --network), and --network=hosts needs --allow-host")
	}
	if network == "" {
		// A dev server and the commands that test it need the loopback;
		// where the host cannot give a private one, the host's network
		// is the working default, and --network none the strict one.
		network = agentproc.NetworkHost
		if slices.Contains(agentproc.SandboxSupport().Networks, agentproc.NetworkLoopback) {
			network = agentproc.NetworkLoopback
		}
	}
	switch network {
	case agentproc.NetworkNone, agentproc.NetworkLoopback, agentproc.NetworkHost:
	default:
		return nil, usagef("--network=%s: want none, loopback or host", network)
	}
	sb := agentproc.WorkspaceSandbox(m.workdir)
	sb.Network = network
	return m.hideStateDir(sb), nil
}

// hideStateDir hides the whole --state-dir, not only this session's dir
// (which the Manager hides): the other sessions' dirs under it hold their
// records, the command lines of what they ran, sandboxed or not (fifth
// attack review, TestMCPStateDirOfOtherSessions).
func (m *managerFlags) hideStateDir(sb *agentproc.Sandbox) *agentproc.Sandbox {
	if m.stateDir != "" {
		// Hide takes absolute paths; the flag may be relative to the
		// working directory, as the Manager takes it (sixth attack
		// review, TestMCPRelativeStateDirHidden).
		dir, err := filepath.Abs(m.stateDir)
		if err != nil {
			dir = m.stateDir
		}
		sb.Hide = append(sb.Hide, dir)
	}
	return sb
}

// probeSandbox starts one command confined by sb (nil: the Manager's
// default), as no tool's owner, to find out before any tool call whether
// this host can confine commands in the work dir (a work dir that holds a
// hidden path cannot be, for one).
func probeSandbox(m *agentproc.Manager, sb *agentproc.Sandbox, workdir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := m.Scope("agentproc-sandbox-probe").Start(ctx, agentproc.Request{Command: "true", WorkDir: workdir, Sandbox: sb})
	if err != nil {
		return err
	}
	info, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	if info.ExitCode == nil || *info.ExitCode != 0 {
		return fmt.Errorf("a confined true exited with %s", state(info))
	}
	return nil
}

func state(info agentproc.Info) string {
	if info.ExitCode == nil {
		return string(info.Reason)
	}
	return fmt.Sprintf("code %d (%s)", *info.ExitCode, info.Reason)
}

// hostList is a repeatable --allow-host.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

func (h *hostList) Set(s string) error {
	*h = append(*h, s)
	return nil
}
