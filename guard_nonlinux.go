//go:build !linux

package agentproc

// hostOOMKills: no OOM kill counter is read here.
func hostOOMKills() (uint64, bool) { return 0, false }

// treeOOMKills: no tree counts OOM kills here.
func treeOOMKills(*containment) (int64, bool) { return 0, false }

// raiseOOMScore: oom_score_adj is Linux's.
func (m *Manager) raiseOOMScore(int) []byte { return nil }

// raiseOOMScoreTree: oom_score_adj is Linux's.
func raiseOOMScoreTree(int, *containment, []byte) {}
