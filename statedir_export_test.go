package agentproc

// WaitStateIdle waits until the state dir's queued record removals are done,
// so a test can look at the dir after retention dropped a process.
func WaitStateIdle(m *Manager) {
	s := m.state
	if s == nil {
		return
	}
	s.fs.waitIdle()
}
