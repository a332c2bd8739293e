package agentproc

import (
	"os"
	"testing"
)

// BenchmarkHiddenMountAliases measures the search of hidden paths' other
// names for WorkspaceSandbox's hide list on this host's mounts: the
// fifteenth attack review searches each round's new names again
// (bind, then overlay, then bind ...), which on a host without chained
// mounts is one round, as before.
func BenchmarkHiddenMountAliases(b *testing.B) {
	hide := resolvePaths(WorkspaceSandbox(b.TempDir()).Hide)
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		b.Skip("no mountinfo")
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = hiddenMountAliases(hide)
	}
}
