package agentproc

// maxRSSUnit converts rusage ru_maxrss to bytes: macOS reports bytes.
const maxRSSUnit = 1
