package agentproc_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestSandboxAllowHostsValidate checks that a bad entry is
// ErrInvalidRequest naming it, and that AllowHosts is refused under every
// other network.
func TestSandboxAllowHostsValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sb   agentproc.Sandbox
		want string // "" for valid
	}{
		{agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"example.com", "*.cdn.example.net:8443", "10.0.0.0/8"}}, ""},
		{agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"example.com", "*"}}, `"*"`},
		{agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"127.0.0.1"}}, `"127.0.0.1"`},
		{agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"example.com:0"}}, `"example.com:0"`},
		{agentproc.Sandbox{Network: agentproc.NetworkPorts, AllowPorts: []int{443}, AllowHosts: []string{"example.com"}}, "AllowHosts"},
		{agentproc.Sandbox{AllowHosts: []string{"example.com"}}, "AllowHosts"},
		{agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowPorts: []int{443}}, "AllowPorts"},
	} {
		err := c.sb.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v: got %v, want nil", c.sb, err)
			}
			continue
		}
		if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want ErrInvalidRequest naming %s", c.sb, err, c.want)
		}
	}
}

// TestSandboxNarrowHosts checks Narrow's rule for AllowHosts: a request
// may name only what the base's list allows.
func TestSandboxNarrowHosts(t *testing.T) {
	t.Parallel()
	base := &agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"*.example.com", "go.dev", "10.1.0.0/16:5432"}}
	for _, c := range []struct {
		req  *agentproc.Sandbox
		want []string // nil: loosened
	}{
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"a.example.com", "*.b.example.com", "go.dev:443", "10.1.2.3:5432"}},
			[]string{"a.example.com", "*.b.example.com", "go.dev:443", "10.1.2.3:5432"}},
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts}, base.AllowHosts},
		{&agentproc.Sandbox{}, base.AllowHosts},
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"example.com"}}, nil},
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"go.dev:22"}}, nil},
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"10.0.0.0/8:5432"}}, nil},
		{&agentproc.Sandbox{Network: agentproc.NetworkHosts, AllowHosts: []string{"*.com"}}, nil},
		{&agentproc.Sandbox{Network: agentproc.NetworkHost}, nil},
		{&agentproc.Sandbox{Network: agentproc.NetworkPorts, AllowPorts: []int{443}}, nil},
	} {
		got, err := base.Narrow(c.req)
		if c.want == nil {
			if err == nil {
				t.Errorf("Narrow(%+v): got %+v, want an error", c.req, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got.AllowHosts, c.want) || got.Network != agentproc.NetworkHosts {
			t.Errorf("Narrow(%+v): got %+v, %v; want AllowHosts %v", c.req, got, err, c.want)
		}
	}
	none, err := base.Narrow(&agentproc.Sandbox{Network: agentproc.NetworkNone})
	if err != nil || none.Network != agentproc.NetworkNone || len(none.AllowHosts) != 0 {
		t.Errorf("Narrow to none: got %+v, %v; want none without AllowHosts", none, err)
	}
	if err := none.Validate(); err != nil {
		t.Errorf("Narrow to none: Validate: %v", err)
	}
}
