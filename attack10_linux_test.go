package agentproc

// The tenth attack review (the ninth's fixes): docs/sandbox-threats.md,
// "Tenth attack review". White-box: the redaction stage is driven
// directly, as in redact_internal_test.go.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestAttackRedactChainPastEdge: a run of secrets each starting inside the
// one before (the ninth review's overlap extension) that starts in what a
// stage held back and goes on past write's edge (the carry and twice the
// window of the next write) had the secret crossing the edge shown from
// there: 14 of 16 bytes for six 16-byte secrets overlapping by two bytes,
// the first write ending one byte into the run.
func TestAttackRedactChainPastEdge(t *testing.T) {
	rnd := rand.New(rand.NewPCG(10, 1))
	word := randomWords(rnd)
	for k := 3; k <= 8; k++ {
		for _, ov := range []int{1, 2, 4, 8} {
			chain := word(16)
			entries := []secretEntry{{"S0", chain}}
			for i := 1; i < k; i++ {
				sec := chain[len(chain)-ov:] + word(16-ov)
				chain += sec[ov:]
				entries = append(entries, secretEntry{fmt.Sprintf("S%d", i), sec})
			}
			s := newRedactSet(entries)
			post := strings.Repeat(" post", 40)
			in := "pre " + chain + post
			for first := 1; first < len(chain); first++ {
				out, _ := runRedact(s, []byte(in), []int{len("pre ") + first, 1 << 20})
				shown := out
				for _, e := range entries {
					shown = strings.ReplaceAll(shown, "[redacted:"+e.name+"]", "")
				}
				if shown != "pre "+post {
					t.Fatalf("%d secrets overlapping by %d, a first write ending %d bytes into them: got %q, want only redactions between %q and %q",
						k, ov, first, out, "pre ", post)
				}
			}
		}
	}
}

// TestAttackRedactPeriodicRun: a secret with a period ("0000…", "abab…")
// occurs at every period of a run of it, and the overlap extension named
// each occurrence: a tree printing 64 KiB of zeros, with 32 zeros a
// secret, had the host emit 65,505 replacements, 786 KB, twelve times what
// it wrote. A run now names a secret again only where it starts after
// the last occurrence named, as adjacent matches are; held back only up to
// a bound, the output of a stream of them still comes before its end.
func TestAttackRedactPeriodicRun(t *testing.T) {
	for _, secret := range []string{strings.Repeat("0", 32), strings.Repeat("ab", 16)} {
		s := newRedactSet([]secretEntry{{"P", secret}})
		// 16 KiB of the run, and 4 writes of 4 KiB below: the run's bound
		// held back is four windows (124 bytes here), and one name per
		// occurrence made 16 KiB 16,000 names before the fix.
		in := strings.Repeat(secret, (16<<10)/len(secret))
		for _, sizes := range [][]int{{1 << 20}, {4 << 10}, {1000, 7}} {
			out, count := runRedact(s, []byte(in), sizes)
			if strings.Contains(out, secret[:8]) {
				t.Fatalf("%q in writes of %v: got %q…, want no part of the secret", secret[:4], sizes, out[:min(len(out), 80)])
			}
			if len(out) > len(in)/2 || count > int64(len(in)/len(secret)) {
				t.Errorf("%q in writes of %v: got %d bytes out, %d replacements, for %d bytes in; want at most %d and %d",
					secret[:4], sizes, len(out), count, len(in), len(in)/2, len(in)/len(secret))
			}
		}
		r, out, _ := newTestRedactor(s)
		for range 4 {
			r.write([]byte(in[:4<<10]))
		}
		if out.Len() == 0 {
			t.Errorf("%q: got nothing out of 4 writes of 4 KiB before the stream's end, want the runs cut and sent", secret[:4])
		}
		r.flush()
	}
}
