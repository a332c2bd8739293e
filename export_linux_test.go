package agentproc

// The tests read /proc through the package's one reader (proc_linux.go).
var (
	ProcState   = procState
	ProcsMarked = procsMarked
)
