package agentproc

import "testing"

// SetCrypttabPath has WorkspaceSandbox read p as the table of encrypted
// block devices until t ends.
func SetCrypttabPath(t *testing.T, p string) {
	old := crypttabPath
	crypttabPath = p
	t.Cleanup(func() { crypttabPath = old })
}
