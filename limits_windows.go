package agentproc

// checkLimits refuses every limit for now: Job Objects could enforce them,
// but that is not implemented yet.
func checkLimits(l Limits, _ *config) error {
	return unsupportedLimits(l, "limits on Windows are not implemented yet")
}

func applyLimits(Limits, *sysProc, *containment) error { return nil }
