package agentproc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestLimitsCeiling: WithLimits values are ceilings. A request above one
// fails with ErrInvalidRequest naming the field and the ceiling before
// anything is set up, so nothing is listed and no running slot is taken; a request at or below it, or leaving
// the field at zero, is accepted with its own value or the default.
func TestLimitsCeiling(t *testing.T) {
	t.Parallel()
	ceiling := agentproc.Limits{Memory: 256 << 20, Procs: 64, CPU: 1}
	m := newManager(t, agentproc.WithLimits(ceiling), agentproc.WithMaxRunning(1))
	for _, tt := range []struct {
		field  string
		limits agentproc.Limits
	}{
		{"Limits.Memory", agentproc.Limits{Memory: 257 << 20}},
		{"Limits.Procs", agentproc.Limits{Procs: 65}},
		{"Limits.CPU", agentproc.Limits{CPU: 1.01}},
		{"Limits.Procs", agentproc.Limits{Memory: 1 << 20, Procs: 1000}},
	} {
		p, err := m.Start(t.Context(), agentproc.Request{Command: "echo ran", Limits: tt.limits})
		if err == nil {
			mustWait(t, p)
			t.Fatalf("%+v: Start: got a process, want ErrInvalidRequest", tt.limits)
		}
		if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(err.Error(), tt.field) ||
			!strings.Contains(err.Error(), "ceiling") {
			t.Errorf("%+v: got %v, want ErrInvalidRequest naming %s and the ceiling", tt.limits, err, tt.field)
		}
	}
	if got := m.List(); len(got) != 0 {
		t.Errorf("List: got %d processes, want none", len(got))
	}
	for _, tt := range []struct {
		req, want agentproc.Limits
	}{
		{agentproc.Limits{}, ceiling},
		{agentproc.Limits{Procs: 10}, agentproc.Limits{Memory: 256 << 20, Procs: 10, CPU: 1}},
		{ceiling, ceiling},
	} {
		p, err := m.Start(t.Context(), agentproc.Request{Command: "true", Limits: tt.req})
		if errors.Is(err, agentproc.ErrUnsupported) {
			t.Skipf("limits cannot be held on this host: %v", err)
		}
		if err != nil {
			t.Fatalf("%+v: Start: %v", tt.req, err)
		}
		if got := mustWait(t, p).Limits; got != tt.want {
			t.Errorf("%+v: Info.Limits: got %+v, want %+v", tt.req, got, tt.want)
		}
	}
}
