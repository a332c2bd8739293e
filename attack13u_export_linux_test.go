package agentproc

// SetMaxHideWatches sets the bound on a Manager's hide watches
// (maxHideWatches) until restore, so that a test passes it with a few
// hundred directories, not thousands.
func SetMaxHideWatches(n int) (restore func()) {
	old := maxHideWatches
	maxHideWatches = n
	return func() { maxHideWatches = old }
}
