package agentproc

import "testing"

// SetPasswdHome has WorkspaceSandbox take home as the user's home in the
// password database, until t ends.
func SetPasswdHome(t *testing.T, home string) {
	old := passwdHome
	passwdHome = func() string { return home }
	t.Cleanup(func() { passwdHome = old })
}
