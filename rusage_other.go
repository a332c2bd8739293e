//go:build unix && !darwin && !ios

package agentproc

// maxRSSUnit converts rusage ru_maxrss to bytes: Linux and the BSDs report
// KiB.
const maxRSSUnit = 1024
