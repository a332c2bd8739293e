package agentproc

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestHostsProxyOnlyWhenUsed checks that a Manager pays nothing for
// NetworkHosts until a tree uses it: Starts without a sandbox and under
// every other network make no proxy (no listener, no goroutine); the
// first NetworkHosts Start makes it, and Close ends it.
func TestHostsProxyOnlyWhenUsed(t *testing.T) {
	m, sb, ws := sandboxTestManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	made := func() bool {
		m.hosts.mu.Lock()
		defer m.hosts.mu.Unlock()
		return m.hosts.p != nil
	}
	run := func(sb *Sandbox) {
		t.Helper()
		p, err := m.Start(ctx, Request{Command: "true", WorkDir: ws, Sandbox: sb})
		if err != nil {
			t.Fatalf("Start under %+v: %v", sb, err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	run(nil)
	for _, n := range SandboxSupport().Networks {
		if n == NetworkHosts {
			continue
		}
		s := *sb
		s.Network = n
		if n == NetworkPorts {
			s.AllowPorts = []int{443}
		}
		run(&s)
	}
	if made() {
		t.Fatalf("proxy: got one made by Starts that never used NetworkHosts, want none")
	}
	if !slices.Contains(SandboxSupport().Networks, NetworkHosts) {
		t.Skipf("NetworkHosts is not enforced here: %s", SandboxSupport())
	}
	s := *sb
	s.Network, s.AllowHosts = NetworkHosts, []string{"example.com"}
	run(&s)
	if !made() {
		t.Errorf("proxy: got none after a NetworkHosts Start, want one")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if made() {
		t.Errorf("proxy: got one after Close, want it ended")
	}
}
