//go:build !linux

package agentproc_test

import "testing"

// reportThreadCPU runs loop; per-thread CPU time is read on Linux only.
func reportThreadCPU(_ *testing.B, loop func()) { loop() }
