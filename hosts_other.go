//go:build !linux

package agentproc

import "os/exec"

// listen makes nothing: NetworkHosts is Linux only, and the OS layer
// reports AllowHosts as not enforced (the tree gets no network).
func (h *hostsRun) listen(*exec.Cmd) error { return nil }

func closeListenerFD(*hostsRun) {}
