//go:build !linux

package agentproc

// makeHostsListener is never called: NetworkHosts is Linux only, and the
// OS layer reports AllowHosts as not enforced (the tree gets no network).
func makeHostsListener() (hostsListener, error) { return hostsListener{}, nil }
