package agentproc_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/agentproc/agentproc"
)

// TestOutputLogPathAbsolute: with WithOutputLog given a relative dir,
// Info.LogPath is the same absolute path, resolved against the working
// directory at New, for a process this Manager runs and for one it
// recovers from a state dir. Not parallel: it changes the working
// directory.
func TestOutputLogPathAbsolute(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	recovered := uuid.NewString()
	writeRecord(t, filepath.Join(base, "state"), recovered, map[string]any{"log_path": "logs/" + recovered + ".log", "exited": true})
	m := newManager(t, agentproc.WithStateDir("state"), agentproc.WithOutputLog("logs", 0))
	infos, err := m.Recovered(testContext(t))
	if err != nil || len(infos) != 1 {
		t.Fatalf("Recovered: got %v, %v, want the one record", infos, err)
	}
	if want := filepath.Join(base, "logs", recovered+".log"); infos[0].LogPath != want {
		t.Errorf("LogPath of the recovered process: got %q, want %q", infos[0].LogPath, want)
	}
	p := mustStart(t, m, agentproc.Request{Command: "echo hi"})
	info := mustWait(t, p)
	if want := filepath.Join(base, "logs", p.ID()+".log"); info.LogPath != want {
		t.Errorf("LogPath of a live process: got %q, want %q", info.LogPath, want)
	}
	if data, err := os.ReadFile(info.LogPath); err != nil || string(data) != "hi\n" {
		t.Errorf("log: got %q, %v, want %q", data, err, "hi\n")
	}
}
