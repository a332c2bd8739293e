//go:build unix

package agentproc_test

import (
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

func TestBackgroundDetection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, command, wantCommand string
		detect, wantBackground     bool
		wantWarning                string
	}{
		{"trailing & promoted", "echo hi &", "echo hi", true, true, ""},
		{"comment after &", "echo hi & # server", "echo hi", true, true, ""},
		{"quoted & untouched", `echo "a &"`, `echo "a &"`, true, false, ""},
		{"nohup warned", "nohup echo hi &", "nohup echo hi", true, true, "nohup"},
		{"detection off", "echo hi &", "echo hi &", false, false, ""},
		{"unparsable runs unchanged", `echo "unterminated`, `echo "unterminated`, true, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, agentproc.WithBackgroundDetection(tt.detect))
			p := mustStart(t, m, agentproc.Request{Command: tt.command})
			info := mustWait(t, p)
			if info.Command != tt.wantCommand || info.Background != tt.wantBackground {
				t.Errorf("got command %q background %v, want %q %v", info.Command, info.Background, tt.wantCommand, tt.wantBackground)
			}
			if got := strings.Join(info.Warnings, "; "); !strings.Contains(got, tt.wantWarning) || (tt.wantWarning == "" && got != "") {
				t.Errorf("warnings got %q, want %q", got, tt.wantWarning)
			}
		})
	}
}

func TestVerbatimSkipsBackgroundDetection(t *testing.T) {
	t.Parallel()
	m := newManager(t) // detection is on by default
	p := mustStart(t, m, agentproc.Request{Command: "true &", Verbatim: true})
	if info := mustWait(t, p); info.Command != "true &" || info.Background || info.Warnings != nil {
		t.Fatalf("got command %q, background %v, warnings %q; want the command as sent, not background",
			info.Command, info.Background, info.Warnings)
	}
	q := mustStart(t, m, agentproc.Request{Command: "true &"})
	if info := mustWait(t, q); info.Command != "true" || !info.Background {
		t.Fatalf("without Verbatim got command %q, background %v; want detection to apply", info.Command, info.Background)
	}
}
