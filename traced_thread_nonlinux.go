//go:build !linux

package agentproc

// reapTracedThreads is Linux's: elsewhere a traced thread is not a child
// of its own for its tracer's wait.
func reapTracedThreads(pid int, outputEnded, waited <-chan struct{}) {}
