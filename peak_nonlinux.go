//go:build unix && !linux

package agentproc

// leaderPeak is the leader's ru_maxrss unchanged: the pages a Linux child
// borrows from the host until exec (see peak_linux.go) are Linux's.
func leaderPeak(rss int64) int64 { return rss }
