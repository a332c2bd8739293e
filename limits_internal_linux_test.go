package agentproc

import "testing"

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 64 << 20: "64 MiB", 3 << 29: "1.5 GiB", 1 << 40: "1 TiB",
	} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d): got %q, want %q", n, got, want)
		}
	}
	if got := (Limits{Memory: 64 << 20, Procs: 64, CPU: 0.25}).String(); got != "memory 64 MiB, procs 64, cpu 0.25" {
		t.Errorf("Limits.String: got %q", got)
	}
}
