//go:build !linux

package agentproc

// hostOOMKills: no OOM kill counter is read here.
func hostOOMKills() (uint64, bool) { return 0, false }

// treeOOMKills: no tree counts OOM kills here.
func treeOOMKills(*containment) (int64, bool) { return 0, false }

// oomScoreValue: oom_score_adj is Linux's, so nothing is raised.
func (m *Manager) oomScoreValue() []byte { return nil }

// raiseOOMScore: never called, since oomScoreValue is nil.
func (m *Manager) raiseOOMScore(int, *containment, []byte) {}

// awaitExitUnreaped: never called, since nothing is raised.
func awaitExitUnreaped(int) {}
