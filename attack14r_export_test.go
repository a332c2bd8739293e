package agentproc

import "testing"

// SetFstabPath has WorkspaceSandbox read p as the file system table until
// t ends.
func SetFstabPath(t *testing.T, p string) {
	old := fstabPath
	fstabPath = p
	t.Cleanup(func() { fstabPath = old })
}
