package agentproc

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateGolden = flag.Bool("update-seatbelt", false, "rewrite testdata/seatbelt from the generator")

// TestSeatbeltGolden holds the macOS Seatbelt profile of each policy to
// its golden file in testdata/seatbelt (rewrite them with
// -update-seatbelt after a deliberate change, and read the diff). The
// profiles are unverified on a Mac; these tests pin what is generated.
func TestSeatbeltGolden(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		pol  sandboxPolicy
	}{
		{"workspace", sandboxPolicy{
			write:    []string{"/Users/dev/project", "/private/var/folders/xy/T/agentproc-sandbox-1"},
			hide:     []string{"/Users/dev/.aws", "/Users/dev/.ssh", "/etc/sudoers"},
			readOnly: []string{"/Users/dev/project/.git"},
			network:  NetworkNone,
		}},
		{"read-list-ports", sandboxPolicy{
			write:   []string{"/Users/dev/project"},
			read:    []string{"/Users/dev/lib", `/Users/dev/odd "name"`},
			shell:   "/bin/zsh",
			network: NetworkPorts,
			ports:   []int{443, 3128},
		}},
		{"host-tty", sandboxPolicy{
			write:   []string{"/Users/dev/project"},
			network: NetworkHost,
			tty:     true,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := seatbeltProfile(&c.pol)
			path := filepath.Join("testdata", "seatbelt", c.name+".sb")
			if *updateGolden {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("profile differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
			}
		})
	}
}
