package agentproc

import "path/filepath"

// resolvePath returns p resolved through links where it exists, else
// cleaned (see sandbox_resolve_unix.go). Windows has no sandbox: this
// keeps Narrow's and InWrite's answers meaningful for a server there.
func resolvePath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		if a, err := filepath.Abs(r); err == nil {
			return a
		}
	}
	return filepath.Clean(p)
}

// hiddenLinkTargets finds nothing on Windows, which has no sandbox (see
// sandbox_resolve_unix.go).
func hiddenLinkTargets([]string, func(string) bool) hiddenWalk { return hiddenWalk{watched: true} }
