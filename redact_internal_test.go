package agentproc

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// redactTestSecrets covers the forms: plain alphanumeric, characters that
// percent- and JSON-encoding change, base64's '+' and '/', a newline (a
// terminal's CR LF), non-ASCII.
var redactTestSecrets = []secretEntry{
	{"GH_TOKEN", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"},
	{"DB_PASS", `p@ss:w/rd&x=1+2"<>\`},
	{"BIN", "\xfb\xff\xbf\xfe\xef\xbe\xfb\xf0"}, // base64: +/+/...
	{"PEM", "KEYLINE1\nKEYLINE2"},
	{"UNI", "clé-secrète-ü"},
}

// runRedact feeds in through a fresh stage of s in writes of the given
// sizes (cycled) and returns the output and the count.
func runRedact(s *redactSet, in []byte, sizes []int) (string, int64) {
	var out bytes.Buffer
	var count atomic.Int64
	r := redaction{sets: [2]*redactSet{s}, count: &count}.newRedactor(func(p []byte) { out.Write(p) })
	for i := 0; len(in) > 0; i++ {
		n := min(len(in), max(1, sizes[i%len(sizes)]))
		r.write(in[:n])
		in = in[n:]
	}
	r.flush()
	return out.String(), count.Load()
}

// embedded is one piece of a redaction test stream and what the stage
// must turn it into.
type embedded struct{ in, want string }

// embedSecret returns e in form kind (0 raw, 1 CR LF, 2-3 base64 std/URL
// inside a longer run starting at alignment pre, 4 query escape, 5
// escape-all lower hex, 6 JSON, 7 JSON ASCII-only with "\/").
func embedSecret(e secretEntry, kind, pre, post int, rnd *rand.Rand) embedded {
	repl := "[redacted:" + e.name + "]"
	switch kind {
	case 1:
		if strings.Contains(e.value, "\n") {
			return embedded{strings.ReplaceAll(e.value, "\n", "\r\n"), repl}
		}
	case 2, 3:
		enc := base64.StdEncoding
		if kind == 3 {
			enc = base64.RawURLEncoding
		}
		plain := make([]byte, pre+len(e.value)+post)
		for i := range plain {
			plain[i] = byte(rnd.IntN(256))
		}
		copy(plain[pre:], e.value)
		s := enc.EncodeToString(plain)
		from, to := (8*pre+5)/6, 8*(pre+len(e.value))/6
		return embedded{s, s[:from] + repl + s[to:]}
	case 4:
		return embedded{url.QueryEscape(e.value), repl}
	case 5:
		return embedded{lowerHexEscapes(escapeAllButAlnum(e.value), '%', 2), repl}
	case 6:
		return embedded{jsonForms(e.value)[0], repl}
	case 7:
		if f := jsonForms(e.value); len(f) == 3 {
			return embedded{strings.ReplaceAll(f[2], "/", `\/`), repl}
		}
	}
	return embedded{e.value, repl}
}

// redactFiller is text around secrets: no byte of it can begin or end a
// form of a test secret, so what the stage must output is known exactly.
const redactFiller = " \t\n\x1b[;,!#"

// buildRedactStream builds a stream of filler and secrets in every form
// from rnd, and the output the stage must produce.
func buildRedactStream(rnd *rand.Rand, pieces int) (in, want string) {
	var b, w strings.Builder
	for range pieces {
		f := make([]byte, rnd.IntN(6))
		for i := range f {
			f[i] = redactFiller[rnd.IntN(len(redactFiller))]
		}
		b.Write(f)
		w.Write(f)
		e := redactTestSecrets[rnd.IntN(len(redactTestSecrets))]
		emb := embedSecret(e, rnd.IntN(8), rnd.IntN(7), rnd.IntN(7), rnd)
		b.WriteString(emb.in)
		w.WriteString(emb.want)
	}
	return b.String(), w.String()
}

// checkNoLeak fails if out holds any form of any test secret.
func checkNoLeak(t *testing.T, out string) {
	t.Helper()
	for _, e := range redactTestSecrets {
		for _, f := range secretForms(e.value) {
			if strings.Contains(out, f) {
				t.Fatalf("output %q holds form %q of %s", out, f, e.name)
			}
		}
	}
}

func TestRedactForms(t *testing.T) {
	t.Parallel()
	s := newRedactSet(redactTestSecrets)
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, e := range redactTestSecrets {
		for kind := range 8 {
			for pre := range 6 {
				emb := embedSecret(e, kind, pre, 3, rnd)
				in := "a " + emb.in + " b"
				for _, sizes := range [][]int{{1 << 20}, {1}, {3, 1, 7}} {
					got, n := runRedact(s, []byte(in), sizes)
					if want := "a " + emb.want + " b"; got != want || n != 1 {
						t.Fatalf("%s kind %d pre %d sizes %v: got %q (%d), want %q (1)", e.name, kind, pre, sizes, got, n, want)
					}
				}
			}
		}
	}
}

// TestRedactHoldsOnlyWhatCouldBeginASecret: a write ending in the start
// of a secret releases everything before it, and holds the start until
// the next write refutes or completes it; nothing is released otherwise.
func TestRedactHoldsOnlyWhatCouldBeginASecret(t *testing.T) {
	t.Parallel()
	s := newRedactSet(redactTestSecrets)
	var out bytes.Buffer
	var count atomic.Int64
	r := redaction{sets: [2]*redactSet{s}, count: &count}.newRedactor(func(p []byte) { out.Write(p) })
	secret := redactTestSecrets[0].value
	r.write([]byte("token: " + secret[:20]))
	if got, want := out.String(), "token: "; got != want {
		t.Fatalf("after a partial secret: got %q, want %q", got, want)
	}
	for i := 20; i < len(secret)-1; i++ {
		r.write([]byte{secret[i]})
		if got, want := out.String(), "token: "; got != want {
			t.Fatalf("after %d bytes of the secret: got %q, want %q", i+1, got, want)
		}
	}
	r.write([]byte(secret[len(secret)-1:] + " ok\n"))
	if got, want := out.String(), "token: [redacted:GH_TOKEN] ok\n"; got != want {
		t.Fatalf("after the whole secret: got %q, want %q", got, want)
	}
	r.write([]byte("ghp_16C7"))
	r.write([]byte("x"))
	if got, want := out.String(), "token: [redacted:GH_TOKEN] ok\nghp_16C7x"; got != want {
		t.Fatalf("after a refuted start: got %q, want %q", got, want)
	}
	r.write([]byte("ghp_16C7"))
	r.flush()
	if got, want := out.String(), "token: [redacted:GH_TOKEN] ok\nghp_16C7xghp_16C7"; got != want {
		t.Fatalf("after flush: got %q, want %q", got, want)
	}
}

// TestRedactLongestAtSameStart: a secret that is the start of another
// does not leave the other's rest in the output.
func TestRedactLongestAtSameStart(t *testing.T) {
	t.Parallel()
	s := newRedactSet([]secretEntry{{"SHORT", "abcdefgh"}, {"LONG", "abcdefghijklmnop"}})
	for _, sizes := range [][]int{{100}, {1}, {8, 100}, {9, 1}} {
		got, _ := runRedact(s, []byte("x abcdefghijklmnop abcdefghij y"), sizes)
		if want := "x [redacted:LONG] [redacted:SHORT]ij y"; got != want {
			t.Errorf("sizes %v: got %q, want %q", sizes, got, want)
		}
	}
}

func TestValidateSecrets(t *testing.T) {
	t.Parallel()
	big := map[string]string{}
	for i := range MaxSecrets + 1 {
		big[strings.Repeat("A", 1+i%60)+string(rune('a'+i%26))+strings.Repeat("b", i/1000)] = "12345678"
	}
	for _, tc := range []struct {
		secrets map[string]string
		want    string
	}{
		{map[string]string{"": "12345678"}, "empty secret name"},
		{map[string]string{"A B": "12345678"}, `secret name "A B"`},
		{map[string]string{"SHORT": "1234567"}, `secret "SHORT" is 7 bytes, at least 8`},
		{map[string]string{"EMPTY": ""}, `secret "EMPTY" is 0 bytes`},
		{map[string]string{"HUGE": strings.Repeat("x", MaxSecretBytes+1)}, "at most 8192 are allowed"},
		{map[string]string{strings.Repeat("N", 65): "12345678"}, "longer than 64 bytes"},
	} {
		err := validateSecrets("WithSecrets", tc.secrets)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("validateSecrets(%.40q): got %v, want an error containing %q", tc.secrets, err, tc.want)
		}
	}
	if len(big) > MaxSecrets {
		if err := validateSecrets("WithSecrets", big); err == nil || !strings.Contains(err.Error(), "at most 1024") {
			t.Errorf("%d secrets: got %v, want an error naming the limit", len(big), err)
		}
	}
	if err := validateSecrets("WithSecrets", map[string]string{"OK_1.x-y": "12345678"}); err != nil {
		t.Errorf("valid secrets: got %v, want nil", err)
	}
}

// FuzzRedactStream puts the test secrets in every form at random
// offsets, with random text around them, and feeds the stream in random
// write splits: nothing leaks and the text around each secret is kept.
func FuzzRedactStream(f *testing.F) {
	for i := range uint64(8) {
		f.Add(i, i*7+1, uint8(4), uint8(i))
	}
	s := newRedactSet(redactTestSecrets)
	f.Fuzz(func(t *testing.T, streamSeed, splitSeed uint64, pieces, maxWrite uint8) {
		in, want := buildRedactStream(rand.New(rand.NewPCG(streamSeed, 0)), 1+int(pieces%16))
		split := rand.New(rand.NewPCG(splitSeed, 1))
		sizes := make([]int, 64)
		for i := range sizes {
			sizes[i] = 1 + split.IntN(1+int(maxWrite))
		}
		got, _ := runRedact(s, []byte(in), sizes)
		checkNoLeak(t, got)
		if got != want {
			t.Fatalf("input %q in writes of %v: got %q, want %q", in, sizes[:8], got, want)
		}
	})
}

// TestRedactMemoryBounded: however the output is split, a stage holds at
// most the longest form less one byte, and its buffers stay within a
// small multiple of the longest form.
func TestRedactMemoryBounded(t *testing.T) {
	t.Parallel()
	s := newRedactSet(redactTestSecrets)
	var count atomic.Int64
	r := redaction{sets: [2]*redactSet{s}, count: &count}.newRedactor(func([]byte) {})
	st := r.stages[0]
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		// Starts of forms, which are held, cut short at random.
		e := redactTestSecrets[rnd.IntN(len(redactTestSecrets))]
		f := secretForms(e.value)
		form := f[rnd.IntN(len(f))]
		p := []byte(form[:1+rnd.IntN(len(form)-1)])
		for len(p) > 0 {
			n := 1 + rnd.IntN(len(p))
			r.write(p[:n])
			p = p[n:]
			if len(st.carry) >= s.maxLen || cap(st.carry) > 2*s.maxLen || cap(st.edge) > 4*s.maxLen {
				t.Fatalf("held %d bytes (cap %d, edge cap %d), want fewer than the longest form, %d",
					len(st.carry), cap(st.carry), cap(st.edge), s.maxLen)
			}
		}
	}
}

// BenchmarkRedactPerStart is what redaction adds to each Start of a
// process that prints nothing, with the Manager holding 50 secrets: the
// checks, the stage and its release at EOF.
func BenchmarkRedactPerStart(b *testing.B) {
	secrets := map[string]string{}
	for i := range 50 {
		secrets["TOKEN_"+strings.Repeat("X", i+1)] = "tok_" + strings.Repeat(string(rune('a'+i%26)), 20)
	}
	m := New(WithSecrets(secrets))
	defer m.Close()
	p := &Process{}
	req := Request{Command: "true"}
	for b.Loop() {
		if err := m.validateRedaction(req); err != nil {
			b.Fatal(err)
		}
		r := m.redactionFor(p, req).newRedactor(func([]byte) {})
		r.flush()
	}
}
