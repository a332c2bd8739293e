package agentproc

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
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

// newTestRedactor returns a redactor of s writing to out, counting in
// count.
func newTestRedactor(s *redactSet) (r *redactor, out *bytes.Buffer, count *atomic.Int64) {
	out, count = new(bytes.Buffer), new(atomic.Int64)
	r = redaction{sets: [2]*redactSet{s}, count: count}.newRedactor(func(p []byte) { out.Write(p) })
	return r, out, count
}

// runRedact feeds in through a fresh stage of s in writes of the given
// sizes (cycled) and returns the output and the count.
func runRedact(s *redactSet, in []byte, sizes []int) (string, int64) {
	r, out, count := newTestRedactor(s)
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
// escape-all lower hex, 6 JSON, 7 JSON ASCII-only with "\/", 8 hex, 9
// raw split by escape sequences, 10 base64 inside a longer run with a
// line break in it).
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
	case 8:
		h := hex.EncodeToString([]byte(e.value))
		if rnd.IntN(2) == 0 {
			h = strings.ToUpper(h)
		}
		return embedded{h, repl}
	case 9:
		var b strings.Builder
		for i := range len(e.value) {
			// Not a sequence ending in the secret's first byte: then
			// the raw secret would begin inside it, and the raw match
			// would keep that byte.
			if esc := redactTestEscapes[rnd.IntN(len(redactTestEscapes))]; i > 0 && rnd.IntN(len(e.value)) < 3 && esc[len(esc)-1] != e.value[0] {
				b.WriteString(esc)
			}
			b.WriteByte(e.value[i])
		}
		return embedded{b.String(), repl}
	case 10:
		// A line of a dump: the break follows at least wrapGap
		// characters of base64 (encodedBefore).
		const line = "QUFBQUFBQUFBQUFB"
		emb := embedSecret(e, 2, pre, post, rnd)
		emb = embedded{line + emb.in, line + emb.want}
		from, to := len(line)+(8*pre+5)/6, len(line)+8*(pre+len(e.value))/6
		s := emb.in
		nl := []string{"\n", "\r\n"}[rnd.IntN(2)]
		// Anywhere but where both pieces of the core are shorter than
		// the matcher's promise (redactTestWrapPiece).
		for {
			k := len(line) + rnd.IntN(len(s)-len(line))
			if k <= from {
				return embedded{s[:k] + nl + s[k:], emb.want[:k] + nl + emb.want[k:]}
			}
			if k >= to {
				kw := len(emb.want) - (len(s) - k)
				return embedded{s[:k] + nl + s[k:], emb.want[:kw] + nl + emb.want[kw:]}
			}
			if max(k-from, to-k) >= redactTestWrapPiece {
				return embedded{s[:k] + nl + s[k:], emb.want}
			}
		}
	}
	return embedded{e.value, repl}
}

// redactTestEscapes are what kind 9 splits a secret with: colours,
// cursor moves, a charset designation, save and restore, and what else
// PlainText removes (controls, C1 controls, OSC and DCS strings).
var redactTestEscapes = []string{"\x1b[31m", "\x1b[0m", "\x1b[1;38;5;208m", "\x1b[2C", "\x1b[K", "\x1b(B", "\x1b7", "\x1b[?25h",
	"\a", "\x00", "\x7f", "\xc2\x85", "\xc2\x9b1m", "\x1b]0;title\a", "\x1b]8;;http://x/\x1b\\", "\x1bPq\x1b\\"}

// redactTestWrapPiece is the shortest piece of a wrapped form on one side
// of its line break that the matcher promises to find it from, for
// redactTestSecrets: step+3, with step from its shortest form (8 bytes).
const redactTestWrapPiece = 8

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
		if len(f) > 0 && f[len(f)-1] == 0x1b {
			// Not an ESC that the next piece's first byte ("P", "X",
			// "]", ...) would make a string sequence, whose payload
			// would hide the start of that piece (README: not caught
			// from an offset inside it).
			f = append(f, '\t')
		}
		b.Write(f)
		w.Write(f)
		e := redactTestSecrets[rnd.IntN(len(redactTestSecrets))]
		kind := rnd.IntN(11)
		if kind == 9 {
			// Not after an unfinished sequence that would take the
			// secret's first byte as its end (README: not caught).
			b.WriteByte('\t')
			w.WriteByte('\t')
		}
		emb := embedSecret(e, kind, rnd.IntN(7), rnd.IntN(7), rnd)
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
		for kind := range 11 {
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
// A refuted start is released once a byte that is in no form follows
// (what is held back is the run of such bytes at the end, secret or not).
func TestRedactHoldsOnlyWhatCouldBeginASecret(t *testing.T) {
	t.Parallel()
	s := newRedactSet(redactTestSecrets)
	r, out, _ := newTestRedactor(s)
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
	if got, want := out.String(), "token: [redacted:GH_TOKEN] ok\n"; got != want {
		t.Fatalf("after a refuted start: got %q, want %q (held like any word of form bytes)", got, want)
	}
	r.write([]byte(" "))
	if got, want := out.String(), "token: [redacted:GH_TOKEN] ok\nghp_16C7x "; got != want {
		t.Fatalf("after a byte in no form: got %q, want %q", got, want)
	}
	r.write([]byte("ghp_16C7"))
	r.flush()
	if got, want := out.String(), "token: [redacted:GH_TOKEN] ok\nghp_16C7x ghp_16C7"; got != want {
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
			if shown := r.stages[1]; len(shown.carry) > s.window || cap(shown.edge) > 4*s.window {
				t.Fatalf("the shown stage held %d bytes (edge cap %d), want at most %d", len(shown.carry), cap(shown.edge), s.window)
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
		r := m.redactionFor(p, req, nil).newRedactor(func([]byte) {})
		r.flush()
	}
}

// TestRedactHex: a secret's hex, lower and upper case, as xxd -p, od and
// log lines print it, is redacted whole, however the writes split it.
func TestRedactHex(t *testing.T) {
	t.Parallel()
	s := newRedactSet(redactTestSecrets)
	for _, e := range redactTestSecrets {
		h := hex.EncodeToString([]byte(e.value))
		for _, form := range []string{h, strings.ToUpper(h)} {
			in := "sum " + form + " ok"
			for _, sizes := range [][]int{{1 << 20}, {1}, {3, 1, 7}} {
				got, n := runRedact(s, []byte(in), sizes)
				if want := "sum [redacted:" + e.name + "] ok"; got != want || n != 1 {
					t.Fatalf("%s sizes %v: got %q (%d), want %q (1)", e.name, sizes, got, n, want)
				}
			}
		}
	}
}

// TestRedactThroughEscapes: a secret split by colour codes, cursor moves
// or other escape sequences is matched as a terminal shows it, and the
// whole span, the sequences inside it included, is replaced; sequences
// around it are kept. Written at once or a byte at a time.
func TestRedactThroughEscapes(t *testing.T) {
	t.Parallel()
	s := newRedactSet(redactTestSecrets)
	secret := redactTestSecrets[0].value // ghp_16C7...
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	for _, tc := range []struct{ in, want string }{
		{"S\x1b[31m" + secret[:5] + "\x1b[0m" + secret[5:] + "\x1b[0m!", "S\x1b[31m[redacted:GH_TOKEN]\x1b[0m!"},
		{"x " + secret[:1] + "\x1b[1;31m" + secret[1:] + " y", "x [redacted:GH_TOKEN] y"},
		{"x " + secret[:10] + "\x1b[2C\x1b[K" + secret[10:20] + "\x1b7\x1b8" + secret[20:] + " y", "x [redacted:GH_TOKEN] y"},
		{"x " + secret[:10] + "\x1b]0;title\x07" + "\x1b[?25l" + secret[10:] + " y", "x [redacted:GH_TOKEN] y"},
		{"\x1b[" + secret + " y", "\x1b[[redacted:GH_TOKEN] y"},
		{"b64 " + b64[:7] + "\x1b[32m" + b64[7:], "b64 [redacted:GH_TOKEN]" + b64[8*len(secret)/6:]},
		{"\x1b]8;;https://u:" + secret + "@h\x1b\\link\x1b]8;;\x1b\\", "\x1b]8;;https://u:[redacted:GH_TOKEN]@h\x1b\\link\x1b]8;;\x1b\\"},
	} {
		for _, sizes := range [][]int{{1 << 20}, {1}, {2, 5, 1}} {
			got, _ := runRedact(s, []byte(tc.in), sizes)
			if got != tc.want {
				t.Errorf("%q in writes of %v: got %q, want %q", tc.in, sizes, got, tc.want)
			}
		}
	}
}

// TestRedactThroughEscapesHoldsOnlyAPrefix: a write that ends in the start
// of a secret and an escape sequence releases everything before the
// start; one that refutes it releases everything, the sequence included.
func TestRedactThroughEscapesHoldsOnlyAPrefix(t *testing.T) {
	t.Parallel()
	s := newRedactSet(redactTestSecrets)
	r, out, _ := newTestRedactor(s)
	secret := redactTestSecrets[0].value
	r.write([]byte("\x1b[1mtoken:\x1b[0m " + secret[:6] + "\x1b[3"))
	if got, want := out.String(), "\x1b[1mtoken:\x1b[0m "; got != want {
		t.Fatalf("after a partial secret: got %q, want %q", got, want)
	}
	r.write([]byte("1m" + secret[6:] + "\x1b[0m "))
	if got, want := out.String(), "\x1b[1mtoken:\x1b[0m [redacted:GH_TOKEN]\x1b[0m "; got != want {
		t.Fatalf("after the rest: got %q, want %q", got, want)
	}
	out.Reset()
	r.write([]byte(" " + secret[:6] + "\x1b[31m"))
	r.write([]byte("?\x1b[0m\n"))
	if got, want := out.String(), " "+secret[:6]+"\x1b[31m?\x1b[0m\n"; got != want {
		t.Fatalf("after a refuted start: got %q, want %q", got, want)
	}
	// A sequence split across writes after a byte in no form is
	// released at once (but for its last bytes, which are in forms),
	// and the next write goes on from inside it.
	out.Reset()
	r.write([]byte("!\x1b[3"))
	if got, want := out.String(), "!\x1b["; got != want {
		t.Fatalf("after half a sequence: got %q, want %q", got, want)
	}
	r.write([]byte("1m" + secret + "."))
	r.flush()
	if got, want := out.String(), "!\x1b[31m[redacted:GH_TOKEN]."; got != want {
		t.Fatalf("after the rest: got %q, want %q", got, want)
	}
}

// wrapLines breaks s into lines of width characters ended by nl, as
// `base64` (76) and `xxd -p` (60) print, and returns where each byte of s
// is in the result.
func wrapLines(s string, width int, nl string) (string, []int) {
	var b strings.Builder
	at := make([]int, len(s)+1)
	for i := range len(s) {
		if i > 0 && i%width == 0 {
			b.WriteString(nl)
		}
		at[i] = b.Len()
		b.WriteByte(s[i])
	}
	at[len(s)] = b.Len()
	return b.String(), at
}

// TestRedactWrapped: base64 and hex wrapped across lines ("\n" or
// "\r\n" inside the encoded secret, as `base64` and `xxd -p` print) are
// redacted at every position of the secret relative to the breaks; the
// span from the first to the last replaced character goes, breaks inside
// it included.
func TestRedactWrapped(t *testing.T) {
	t.Parallel()
	secret := "sk-live-" + strings.Repeat("Zq9x", 10) // 48 bytes: the guarantee holds whole
	s := newRedactSet([]secretEntry{{"KEY", secret}})
	rnd := rand.New(rand.NewPCG(5, 6))
	for _, width := range []int{76, 64, 60} {
		for _, nl := range []string{"\n", "\r\n"} {
			for pre := 0; pre < width+3; pre++ {
				plain := make([]byte, pre+len(secret)+20)
				for i := range plain {
					plain[i] = byte(rnd.IntN(256))
				}
				copy(plain[pre:], secret)
				for _, enc := range []func([]byte) (string, int, int){
					func(p []byte) (string, int, int) {
						return base64.StdEncoding.EncodeToString(p), (8*pre + 5) / 6, 8 * (pre + len(secret)) / 6
					},
					func(p []byte) (string, int, int) {
						return hex.EncodeToString(p), 2 * pre, 2 * (pre + len(secret))
					},
				} {
					enc, from, to := enc(plain)
					in, at := wrapLines(enc, width, nl)
					want := in[:at[from]] + "[redacted:KEY]" + in[at[to-1]+1:]
					for _, sizes := range [][]int{{1 << 20}, {1}, {7, 3}} {
						got, n := runRedact(s, []byte(in), sizes)
						if got != want || n != 1 {
							t.Fatalf("width %d %q pre %d sizes %v: got %q (%d), want %q (1)", width, nl, pre, sizes, got, n, want)
						}
					}
				}
			}
		}
	}
}

// TestRedactThroughEscapesMemoryBounded: the start of a secret followed by
// endless escape sequences and no text is neither released nor held
// without bound: the held sequences are dropped past a limit, and the
// secret is still redacted when its rest comes.
func TestRedactThroughEscapesMemoryBounded(t *testing.T) {
	t.Parallel()
	s := newRedactSet(redactTestSecrets)
	r, out, _ := newTestRedactor(s)
	shown := r.stages[1]
	secret := redactTestSecrets[0].value
	r.write([]byte("x " + secret[:6]))
	for range 20000 {
		r.write([]byte("\x1b[2C\x1b[1D"))
		if n := len(shown.carry); n > s.window+maxHeldEscapes+8 {
			t.Fatalf("held %d bytes, want at most %d", n, s.window+maxHeldEscapes+8)
		}
	}
	r.write([]byte(secret[6:] + " y"))
	r.flush()
	if got := out.String(); !strings.HasPrefix(got, "x ") || !strings.HasSuffix(got, "[redacted:GH_TOKEN] y") || strings.Contains(got, secret[:6]) {
		t.Fatalf("got %.60q...%q, want \"x \", sequences, \"[redacted:GH_TOKEN] y\"", got, got[max(0, len(got)-40):])
	}
}

// TestRedactLineEndNotHeld: a line of text that ends in the first
// characters of a base64 or hex form is released at its line break: the
// break is skipped inside a form only after a line of a dump, so a prompt
// or a last line is not held back until more output comes.
func TestRedactLineEndNotHeld(t *testing.T) {
	t.Parallel()
	s := newRedactSet(redactTestSecrets)
	for _, e := range redactTestSecrets {
		for _, f := range redactForms(e.value) {
			if !f.wrap {
				continue
			}
			for n := 1; n <= 3; n++ {
				r, out, _ := newTestRedactor(s)
				in := "done: " + f.text[:n] + "\n"
				r.write([]byte(in))
				if got := out.String(); got != in {
					t.Fatalf("%s form %q: got %q before the output ends, want %q", e.name, f.text, got, in)
				}
			}
		}
	}
}

// TestRedactOverlappingSecrets: where one secret's end is another's start
// ("…SHARED99" and "SHARED99…"), the output holds neither's bytes: the
// match that starts first is extended over every secret that starts
// inside it and goes on past its end, whatever the write sizes (the ninth
// attack review, root: 8 of the second secret's 14 bytes were shown).
func TestRedactOverlappingSecrets(t *testing.T) {
	a := secretEntry{"FIRST", "hunter2xSHARED99"}
	b := secretEntry{"SECOND", "SHARED99tail7Q"}
	c := secretEntry{"THIRD", "tail7Qzz5Kp"}
	for _, tt := range []struct {
		name    string
		entries []secretEntry
		in      string
		hidden  []string
	}{
		{"two", []secretEntry{a, b}, "x hunter2xSHARED99tail7Q y", []string{"tail7Q", "hunter2", "SHARED99"}},
		{"two reversed order", []secretEntry{b, a}, "x hunter2xSHARED99tail7Q y", []string{"tail7Q", "hunter2", "SHARED99"}},
		{"three in a chain", []secretEntry{a, b, c}, "x hunter2xSHARED99tail7Qzz5Kp y", []string{"zz5Kp", "tail7Q", "hunter2", "SHARED99"}},
		{"at the end", []secretEntry{a, b}, "x hunter2xSHARED99tail7Q", []string{"tail7Q", "hunter2", "SHARED99"}},
		{"apart", []secretEntry{a, b}, "hunter2xSHARED99 SHARED99tail7Q", []string{"tail7Q", "hunter2", "SHARED99"}},
	} {
		s := newRedactSet(tt.entries)
		for _, sizes := range [][]int{{1 << 20}, {1}, {3}, {7}, {5, 11}, {17}} {
			out, _ := runRedact(s, []byte(tt.in), sizes)
			for _, h := range tt.hidden {
				if strings.Contains(out, h) {
					t.Errorf("%s, writes of %v: got %q, want no %q in it", tt.name, sizes, out, h)
				}
			}
			if !strings.HasPrefix(out, tt.in[:strings.IndexAny(tt.in, "hS")]) {
				t.Errorf("%s, writes of %v: got %q, want the text before the secrets kept", tt.name, sizes, out)
			}
		}
	}
}

// randomWords returns a function that makes a word of n random letters
// and digits from rnd, the secrets of the overlap tests.
func randomWords(rnd *rand.Rand) func(n int) string {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	return func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alnum[rnd.IntN(len(alnum))]
		}
		return string(b)
	}
}

// TestRedactOverlappingSecretsRandom: random pairs of secrets where the
// second begins with the first's end, written in random sizes: neither
// secret's own bytes (the first's head, the second's tail) are shown.
func TestRedactOverlappingSecretsRandom(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 37))
	word := randomWords(rnd)
	for range 300 {
		head, shared, tail := word(6+rnd.IntN(10)), word(2+rnd.IntN(8)), word(6+rnd.IntN(10))
		entries := []secretEntry{{"A", head + shared}, {"B", shared + tail}}
		if rnd.IntN(2) == 0 {
			entries[0], entries[1] = entries[1], entries[0]
		}
		s := newRedactSet(entries)
		in := "pre " + head + shared + tail + []string{"", " post", "\n"}[rnd.IntN(3)]
		sizes := []int{1 + rnd.IntN(len(in)), 1 + rnd.IntN(4)}
		out, _ := runRedact(s, []byte(in), sizes)
		if strings.Contains(out, head) || strings.Contains(out, tail) {
			t.Fatalf("%q then %q in writes of %v: got %q, want neither %q nor %q in it", entries[0].value, entries[1].value, sizes, out, head, tail)
		}
	}
}

// TestRedactOverlappingSecretsChain: three secrets, each beginning with
// the end of another (in any order of registration), written in random
// sizes: no byte of any of them is shown.
func TestRedactOverlappingSecretsChain(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 38))
	word := randomWords(rnd)
	for range 1000 {
		h, s1, s2, tl := word(6+rnd.IntN(10)), word(2+rnd.IntN(8)), word(2+rnd.IntN(8)), word(6+rnd.IntN(10))
		m := word(max(0, 8-len(s1)-len(s2)) + rnd.IntN(4)) // B is a secret: 8 bytes or more
		entries := []secretEntry{{"A", h + s1}, {"B", s1 + m + s2}, {"C", s2 + tl}}
		rnd.Shuffle(3, func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
		s := newRedactSet(entries)
		post := []string{"", " post", "\n"}[rnd.IntN(3)]
		in := "pre " + h + s1 + m + s2 + tl + post
		sizes := []int{1 + rnd.IntN(len(in)), 1 + rnd.IntN(4)}
		out, _ := runRedact(s, []byte(in), sizes)
		shown := out
		for _, name := range []string{"A", "B", "C"} {
			shown = strings.ReplaceAll(shown, "[redacted:"+name+"]", "")
		}
		if shown != "pre "+post {
			t.Fatalf("%v in writes of %v: got %q, want only redactions between %q and %q", entries, sizes, out, "pre ", post)
		}
	}
}
