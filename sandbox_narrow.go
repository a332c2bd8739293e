package agentproc

import (
	"maps"
	"path/filepath"
	"slices"

	"golang.org/x/xerrors"
)

// ErrSandboxLoosened is returned by Sandbox.Narrow, wrapped with the field
// and the reason, for a requested policy that would give a tree more than
// the base policy does. A server answers it with 403.
var ErrSandboxLoosened = xerrors.New("agentproc: the sandbox would be looser than the operator's")

// Narrow returns the policy that req asks for, held within sb: the one a
// server runs a client's request under when sb is the operator's policy.
// req can only take away: fewer or narrower Write and Read paths, more
// Hide, ReadOnly and Env.Drop, a stricter Network (NetworkNone is always
// stricter, NetworkHost never; NetworkPorts with a subset of AllowPorts,
// NetworkHosts with entries the base's AllowHosts allows),
// Env.Keep only of names sb keeps, BestEffort only where sb has it, and
// NoDefaultWrite. Anything else is ErrSandboxLoosened naming the field. A
// nil sb confines nothing, so any req narrows it; a nil req asks for sb
// itself. Both are left unchanged.
//
// Paths are compared resolved: every component, through symbolic links,
// with ".." applied to where a link led (a Write of ws/link, where link
// points outside sb's Write, is refused with the same error as a path
// written outside). The result holds the resolved paths, and remembers
// sb's: Start checks again, when it grants them, that the result's Write
// and Read and a work dir the Request names (unless NoDefaultWrite)
// resolve inside sb's, so that a link swapped in after Narrow is refused
// with ErrSandboxLoosened too, rather than followed.
func (sb *Sandbox) Narrow(req *Sandbox) (*Sandbox, error) {
	if sb == nil {
		return req.Clone(), nil
	}
	out := sb.Clone()
	out.bound = resolvedPaths(sb.Write)
	if sb.Read != nil {
		out.readBound = resolvedPaths(append(slices.Clone(sb.Read), sb.Write...))
	}
	if req == nil {
		return out, nil
	}
	if req.Write != nil {
		out.Write = make([]string, len(req.Write))
		for i, p := range req.Write {
			r := resolvePath(p)
			if !filepath.IsAbs(p) || !inResolved(r, out.bound) {
				return nil, xerrors.Errorf("Sandbox.Write[%d] %q is not inside the base policy's Write: %w", i, p, ErrSandboxLoosened)
			}
			out.Write[i] = r
		}
	}
	if req.Read != nil {
		out.Read = make([]string, len(req.Read))
		for i, p := range req.Read {
			r := resolvePath(p)
			if out.readBound != nil && (!filepath.IsAbs(p) || !inResolved(r, out.readBound)) {
				return nil, xerrors.Errorf("Sandbox.Read[%d] %q is not inside the base policy's Read: %w", i, p, ErrSandboxLoosened)
			}
			out.Read[i] = r
		}
	}
	out.Hide = union(sb.Hide, req.Hide)
	out.ReadOnly = union(sb.ReadOnly, req.ReadOnly)
	switch base, want := sb.network(), req.Network; {
	case want == "" || want == base && base != NetworkPorts && base != NetworkHosts:
	case want == NetworkNone || base == NetworkHost:
		out.Network, out.AllowPorts, out.AllowHosts = want, slices.Clone(req.AllowPorts), slices.Clone(req.AllowHosts)
	case want == NetworkHosts && base == NetworkHosts:
		hosts, err := narrowHosts(sb.AllowHosts, req.AllowHosts)
		if err != nil {
			return nil, err
		}
		if len(hosts) > 0 {
			out.AllowHosts = hosts
		}
	case want == NetworkPorts && base == NetworkPorts:
		for i, p := range req.AllowPorts {
			if !slices.Contains(sb.AllowPorts, p) {
				return nil, xerrors.Errorf("Sandbox.AllowPorts[%d] %d is not among the base policy's: %w", i, p, ErrSandboxLoosened)
			}
		}
		if len(req.AllowPorts) > 0 {
			out.AllowPorts = slices.Clone(req.AllowPorts)
		}
	default:
		return nil, xerrors.Errorf("Sandbox.Network %q is looser than the base policy's %q: %w", want, base, ErrSandboxLoosened)
	}
	if req.Env.Keep != nil {
		for i, k := range req.Env.Keep {
			if !slices.Contains(sb.Env.Keep, k) {
				return nil, xerrors.Errorf("Sandbox.Env.Keep[%d] %q is not kept by the base policy: %w", i, k, ErrSandboxLoosened)
			}
		}
		out.Env.Keep = slices.Clone(req.Env.Keep)
	}
	out.Env.Drop = union(sb.Env.Drop, req.Env.Drop)
	if len(req.Env.Set) > 0 {
		if out.Env.Set == nil {
			out.Env.Set = map[string]string{}
		}
		maps.Copy(out.Env.Set, req.Env.Set)
	}
	if req.BestEffort && !sb.BestEffort {
		return nil, xerrors.Errorf("Sandbox.BestEffort: the base policy fails closed: %w", ErrSandboxLoosened)
	}
	out.BestEffort = req.BestEffort
	out.NoDefaultWrite = sb.NoDefaultWrite || req.NoDefaultWrite
	return out, nil
}

// inResolved reports whether the resolved path r lies within one of the
// resolved dirs.
func inResolved(r string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return within(r, d) })
}

// heldWithin checks that each of the resolved paths lies within one of
// the resolved bound, with Narrow's error for one that does not. The
// error names no path: a resolved one is where a link the tree made
// leads, text the tree wrote that no redaction has seen (thirteenth
// attack review, TestAttackWorkDirCarriesSecret), and the caller knows
// the paths it passed.
func heldWithin(field string, paths, bound []string, of string) error {
	for _, p := range paths {
		if !inResolved(p, bound) {
			return xerrors.Errorf("%s: a path resolves elsewhere since the check and is not inside the base policy's %s: %w", field, of, ErrSandboxLoosened)
		}
	}
	return nil
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// InWrite reports whether dir lies inside one of sb.Write, both resolved
// (every component, through symbolic links, as Narrow compares them): a
// link inside the workspace that points out of it is not inside. A work
// dir is writable to its tree, so a server or a tool that lets its client
// choose the work dir checks it with this first; the Sandbox from sb.Narrow
// (nil for a request's own policy) then holds the work dir within sb
// again when Start grants it.
func (sb *Sandbox) InWrite(dir string) bool {
	return filepath.IsAbs(dir) && inResolved(resolvePath(dir), resolvedPaths(sb.Write))
}
