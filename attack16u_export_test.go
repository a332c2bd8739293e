package agentproc

import "testing"

// SetPasswdHome has WorkspaceSandbox take home as the user's home in the
// password database, until t ends.
func SetPasswdHome(t *testing.T, home string) {
	old := passwdHome
	passwdHome = func() string { return home }
	t.Cleanup(func() { passwdHome = old })
}

// SetUserRuntimeDir has WorkspaceSandbox take dir as the user's runtime
// dir under /run/user, until t ends.
func SetUserRuntimeDir(t *testing.T, dir string) {
	old := userRuntimeDir
	userRuntimeDir = func() string { return dir }
	t.Cleanup(func() { userRuntimeDir = old })
}
