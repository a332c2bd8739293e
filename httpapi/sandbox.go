package httpapi

import (
	"errors"
	"net/http"

	"github.com/agentproc/agentproc"
)

// Sandbox is the wire form of agentproc.Sandbox in a start request. A
// client can only narrow the operator's policy (WithSandbox, else the
// Manager's default; see agentproc.Sandbox.Narrow): a request that would
// loosen it is refused with 403 naming the field, and nothing runs.
type Sandbox struct {
	// Write: directories the tree may write, each inside the operator's.
	Write []string `json:"write,omitempty"`
	// Read: absent means the operator's; a list means only these (plus
	// what a shell needs).
	Read []string `json:"read,omitempty"`
	// Hide and ReadOnly are added to the operator's.
	Hide     []string `json:"hide,omitempty"`
	ReadOnly []string `json:"read_only,omitempty"`
	// Network: "none", "loopback", "ports", "hosts" or "host", no looser
	// than the operator's; absent keeps it.
	Network    string `json:"network,omitempty"`
	AllowPorts []int  `json:"allow_ports,omitempty"`
	// AllowHosts: under "hosts", entries the operator's allow_hosts
	// allows (agentproc.Sandbox.AllowHosts); absent keeps the operator's.
	AllowHosts []string `json:"allow_hosts,omitempty"`
	// EnvKeep, EnvDrop and EnvSet are agentproc.SandboxEnv's Keep (only
	// names the operator keeps), Drop and Set.
	EnvKeep []string          `json:"env_keep,omitempty"`
	EnvDrop []string          `json:"env_drop,omitempty"`
	EnvSet  map[string]string `json:"env_set,omitempty"`
	// BestEffort: absent keeps the operator's; false makes it fail closed;
	// true only where the operator's does too.
	BestEffort *bool `json:"best_effort,omitempty"`
	// NoDefaultWrite leaves the work dir and the temp dir out of Write.
	NoDefaultWrite bool `json:"no_default_write,omitempty"`
}

// SandboxInfo is how a process is confined (agentproc.Confinement).
type SandboxInfo struct {
	Mechanisms  []string `json:"mechanisms"`
	LandlockABI int      `json:"landlock_abi,omitempty"`
	Network     string   `json:"network"`
}

func sandboxInfo(c *agentproc.Confinement) *SandboxInfo {
	if c == nil {
		return nil
	}
	return &SandboxInfo{Mechanisms: c.Mechanisms, LandlockABI: c.LandlockABI, Network: string(c.Network)}
}

// operatorSandbox is the policy every start runs under: WithSandbox's,
// else the Manager's default; nil when neither confines anything.
func (h *handler) operatorSandbox() *agentproc.Sandbox {
	if h.cfg.sandboxSet {
		return h.cfg.sandbox
	}
	return h.m.DefaultSandbox()
}

// sandboxFromRequest sets areq.Sandbox to the client's policy held within
// the operator's, or returns the reply for one that would loosen it. With
// an operator policy the work dir must also lie inside its Write (unless
// it leaves the work dir out with NoDefaultWrite): every work dir is
// writable to its tree, so a client choosing it freely could write
// anywhere. "" (the Manager's default work dir) is the operator's choice.
func (h *handler) sandboxFromRequest(req StartRequest, areq *agentproc.Request) *Error {
	base := h.operatorSandbox()
	var want *agentproc.Sandbox
	if s := req.Sandbox; s != nil {
		want = &agentproc.Sandbox{
			Write: s.Write, Read: s.Read, Hide: s.Hide, ReadOnly: s.ReadOnly,
			Network: agentproc.Network(s.Network), AllowPorts: s.AllowPorts, AllowHosts: s.AllowHosts,
			Env:            agentproc.SandboxEnv{Keep: s.EnvKeep, Drop: s.EnvDrop, Set: s.EnvSet},
			NoDefaultWrite: s.NoDefaultWrite,
		}
		if s.BestEffort != nil {
			want.BestEffort = *s.BestEffort
		} else if base != nil {
			want.BestEffort = base.BestEffort
		}
		if err := want.Validate(); err != nil {
			return &Error{StatusCode: http.StatusBadRequest, Message: "The sandbox is invalid.", Detail: err.Error()}
		}
	}
	sb, e := h.narrowSandbox(base, want, req.WorkDir)
	if e != nil {
		return e
	}
	areq.Sandbox = sb
	return nil
}

// narrowSandbox is the one check of a start's policy, for both profiles:
// want (nil: none asked for) held within base, the operator's, and the
// work dir inside base's Write, both compared resolved through links
// (agentproc.Sandbox.Narrow, InWrite). Without base or want it is the
// Manager's default, the policy such a start gets. The result, nil
// without a policy, also has Start hold the work dir within base where it
// grants it.
func (h *handler) narrowSandbox(base, want *agentproc.Sandbox, workDir string) (*agentproc.Sandbox, *Error) {
	if base == nil && want == nil {
		// WithSandbox(nil) with a start that asks for no policy: the tree
		// still gets the Manager's default (Request.Sandbox nil), and
		// under it too the work dir is writable to the tree, so the work
		// dir is held within the policy the tree actually gets, as
		// llmtool does (eleventh attack review, "Noticed, left alone";
		// TestNilSandboxHoldsWorkDirInManagerDefault).
		base = h.m.DefaultSandbox()
	}
	sb, err := base.Narrow(want)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, agentproc.ErrSandboxLoosened) {
			status = http.StatusForbidden
		}
		return nil, &Error{StatusCode: status, Message: "The sandbox asks for more than this server allows.", Detail: err.Error()}
	}
	if base != nil && !sb.NoDefaultWrite && workDir != "" && !base.InWrite(workDir) {
		return nil, &Error{StatusCode: http.StatusForbidden, Message: "The work dir is outside what this server's sandbox lets a command write.",
			Detail: "workdir " + workDir + " is not inside the sandbox's write paths"}
	}
	return sb, nil
}

// Denial is something the sandbox refused a tree (agentproc.Denial).
type Denial struct {
	Kind     string `json:"kind"`
	Op       string `json:"op"`
	Target   string `json:"target"`
	Rule     string `json:"rule"`
	Count    int    `json:"count"`
	Inferred bool   `json:"inferred,omitempty"`
	// Hint is the smallest change to the policy that would allow it
	// (agentproc.DenialHint).
	Hint string `json:"hint"`
}

func denialsFromInfo(ds []agentproc.Denial) []Denial {
	out := make([]Denial, 0, len(ds))
	for _, d := range ds {
		out = append(out, Denial{Kind: d.Kind, Op: d.Op, Target: d.Target, Rule: d.Rule, Count: d.Count,
			Inferred: d.Inferred, Hint: agentproc.DenialHint(d)})
	}
	return out
}
