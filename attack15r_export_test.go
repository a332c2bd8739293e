package agentproc

import "testing"

// SetCrypttabPath has WorkspaceSandbox read p as the table of encrypted
// block devices until t ends.
func SetCrypttabPath(t *testing.T, p string) {
	old := crypttabPath
	crypttabPath = p
	t.Cleanup(func() { crypttabPath = old })
}

// SetMountTableGlobs has WorkspaceSandbox read the mount units that units
// matches and the autofs maps that maps matches until t ends.
func SetMountTableGlobs(t *testing.T, units, maps string) {
	oldUnits, oldMaps := mountUnitGlob, autofsMapGlob
	mountUnitGlob, autofsMapGlob = units, maps
	t.Cleanup(func() { mountUnitGlob, autofsMapGlob = oldUnits, oldMaps })
}

// SetNixConfPath has WorkspaceSandbox read p as the Nix daemon's
// configuration until t ends.
func SetNixConfPath(t *testing.T, p string) {
	old := nixConfPath
	nixConfPath = p
	t.Cleanup(func() { nixConfPath = old })
}
