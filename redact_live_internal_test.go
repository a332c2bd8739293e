package agentproc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// liveTestRedactor returns a redactor with fixed set fixed (nil: none)
// and the live set of ss, writing to out.
func liveTestRedactor(fixed *redactSet, ss *startedSecrets) (r *redactor, out *bytes.Buffer, count *atomic.Int64) {
	out, count = new(bytes.Buffer), new(atomic.Int64)
	r = redaction{sets: [2]*redactSet{fixed}, live: &ss.sets, count: count}.newRedactor(func(p []byte) { out.Write(p) })
	return r, out, count
}

// writeIn feeds in to r in writes of the given sizes (cycled).
func writeIn(r *redactor, in string, sizes []int) {
	for i := 0; len(in) > 0; i++ {
		n := min(len(in), max(1, sizes[i%len(sizes)]))
		r.write([]byte(in[:n]))
		in = in[n:]
	}
}

// TestRedactLiveSetMidStream: a stream picks up a newer live set at its
// next write. A secret split across the write in which the set changes,
// whose start the stages held back (a run of letters and digits, under
// the old set), is judged again against the new set and replaced whole;
// bytes that are no secret come out once each, none lost or doubled. The
// start is held partly by the raw stage and partly by the shown stage
// after it, whose carry it would otherwise pass unscanned.
func TestRedactLiveSetMidStream(t *testing.T) {
	t.Parallel()
	const secret = "tok0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZab" // 42 bytes
	// The old set: 8-byte secrets that together have every letter and
	// digit, none inside the new one (descending runs), so a run of
	// them at the end of a write is held; the longest form is 16 bytes
	// (hex), so each stage holds at most 15.
	const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz01"
	var old []secretEntry
	for i := 0; i < len(alnum); i += 8 {
		b := []byte(alnum[i : i+8])
		slices.Reverse(b)
		old = append(old, secretEntry{fmt.Sprintf("OLD%d", i/8), string(b)})
	}
	nosecret := "tok0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZzz"
	// With merge, the new secret comes with enough others that the
	// recent set is merged into the base: the recent stages release
	// what they hold into the base's.
	var fillers []secretEntry
	for i := range 20 {
		fillers = append(fillers, secretEntry{fmt.Sprintf("FILL%d", i), fmt.Sprintf("filler-%02d-qwerty", i)})
	}
	for _, merge := range []bool{false, true} {
		for _, fixedSet := range []bool{false, true} {
			for _, tc := range []struct {
				name      string
				pre, post string // written before and after the set changes
				want      string
				n         int64
			}{
				{"raw held", "x " + secret[:10], secret[10:] + " y", "x [redacted:NEW] y", 1},
				{"raw and shown held", "x " + secret[:29], secret[29:] + " y", "x [redacted:NEW] y", 1},
				{"through an escape", "x " + secret[:10] + "\x1b[31m" + secret[10:20], secret[20:] + "\x1b[0m y", "x [redacted:NEW]\x1b[0m y", 1},
				{"no secret", "x " + nosecret[:29], nosecret[29:] + " y", "x " + nosecret + " y", 0},
				{"after the change", "x ", secret + " y", "x [redacted:NEW] y", 1},
			} {
				for _, sizes := range [][]int{{1 << 20}, {1}, {3, 1, 7}} {
					name := fmt.Sprintf("%s fixed=%v merge=%v sizes=%v", tc.name, fixedSet, merge, sizes)
					var ss startedSecrets
					var fixed *redactSet
					if fixedSet {
						fixed = newRedactSet([]secretEntry{{"HOST", "hostsecret99"}})
					}
					ss.register(old)
					r, out, count := liveTestRedactor(fixed, &ss)
					writeIn(r, tc.pre, sizes)
					before := ss.sets.Load()
					if merge {
						ss.register(append([]secretEntry{{"NEW", secret}}, fillers...))
						ss.wait() // the merge runs in the background
					} else {
						ss.register([]secretEntry{{"NEW", secret}})
					}
					if merged := ss.sets.Load().base != before.base; merged != merge {
						t.Fatalf("%s: merged: got %v, want %v", name, merged, merge)
					}
					writeIn(r, tc.post, sizes)
					r.flush()
					if got := out.String(); got != tc.want || count.Load() != tc.n {
						t.Errorf("%s: got %q (%d), want %q (%d)", name, got, count.Load(), tc.want, tc.n)
					}
				}
			}
		}
	}
}

// TestRedactLiveSetFromNone: a stream started before any request had a
// secret passes its output through and redacts a secret registered
// later, also one split by an escape sequence after a string begun
// before the set existed, which is passed on whole.
func TestRedactLiveSetFromNone(t *testing.T) {
	t.Parallel()
	const secret = "tok0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZab"
	var ss startedSecrets
	r, out, count := liveTestRedactor(nil, &ss)
	r.write([]byte("before \x1b]0;tit"))
	ss.register([]secretEntry{{"NEW", secret}})
	r.write([]byte("le\x07 x " + secret[:9] + "\x1b[1m" + secret[9:] + " y"))
	r.flush()
	want := "before \x1b]0;title\x07 x [redacted:NEW] y"
	if got := out.String(); got != want || count.Load() != 1 {
		t.Errorf("got %q (%d), want %q (1)", got, count.Load(), want)
	}
}

// TestRedactLiveSetPerManager: a request's secrets are redacted in every
// stream of the Manager that started it, also streams made before, and
// in no stream of another Manager; registering the same secret again
// does not rebuild the set.
func TestRedactLiveSetPerManager(t *testing.T) {
	t.Parallel()
	const secret = "tok0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZab"
	m1, m2 := New(), New()
	defer m1.Close()
	defer m2.Close()
	var out1, out2 strings.Builder
	r1 := m1.redactionFor(&Process{}, Request{}, nil).newRedactor(func(p []byte) { out1.Write(p) })
	r2 := m2.redactionFor(&Process{}, Request{}, nil).newRedactor(func(p []byte) { out2.Write(p) })
	req := Request{Secrets: map[string]string{"NEW": secret}}
	m1.registerSecrets(req, nil)
	set := m1.started.sets.Load()
	m1.registerSecrets(req, nil)
	if again := m1.started.sets.Load(); again != set {
		t.Errorf("registering the same secret again: got a new set, want the same")
	}
	for _, r := range []*redactor{r1, r2} {
		r.write([]byte("x " + secret + " y"))
		r.flush()
	}
	if got, want := out1.String(), "x [redacted:NEW] y"; got != want {
		t.Errorf("the Manager that started it: got %q, want %q", got, want)
	}
	if got, want := out2.String(), "x "+secret+" y"; got != want {
		t.Errorf("another Manager: got %q, want %q", got, want)
	}
}

// TestRedactLiveSetRandom: secrets registered one at a time, past a merge
// into the base, at random points of a stream written in random pieces;
// each secret is printed only after it is registered, raw or split by a
// colour code. The output is the input with every secret replaced, no
// byte lost or doubled.
func TestRedactLiveSetRandom(t *testing.T) {
	t.Parallel()
	secrets := liveTestTokens(40)
	for seed := range uint64(40) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		var ss startedSecrets
		var fixed *redactSet
		if seed%2 == 0 {
			fixed = newRedactSet([]secretEntry{{"HOST", "hostsecret99"}})
		}
		r, out, count := liveTestRedactor(fixed, &ss)
		var in, want strings.Builder
		var pending []byte
		registered := 0
		for step := 0; step < 400 || len(pending) > 0; step++ {
			switch c := rnd.IntN(10); {
			case step >= 400 || c < 4:
				n := min(len(pending), 1+rnd.IntN(40))
				r.write(pending[:n])
				pending = pending[n:]
			case c < 5 && registered < len(secrets):
				ss.register(secrets[registered : registered+1])
				registered++
			case c < 7 && registered > 0:
				e := secrets[rnd.IntN(registered)]
				piece := e.value
				if rnd.IntN(2) == 0 {
					k := 1 + rnd.IntN(len(piece)-1)
					piece = piece[:k] + "\x1b[31m" + piece[k:]
				}
				in.WriteString(piece + " ")
				want.WriteString("[redacted:" + e.name + "] ")
				pending = append(pending, piece+" "...)
			default:
				w := []string{"alpha ", "beta\n", "\x1b[1mgamma\x1b[0m ", "delta42 ", "x"}[rnd.IntN(5)]
				in.WriteString(w)
				want.WriteString(w)
				pending = append(pending, w...)
			}
		}
		r.flush()
		ss.wait()
		if got := out.String(); got != want.String() {
			t.Fatalf("seed %d: got %q, want %q (count %d)", seed, got, want.String(), count.Load())
		}
	}
}

// liveTestTokens returns n token-shaped secrets that share no 4 bytes
// with the test's words.
func liveTestTokens(n int) []secretEntry {
	rnd := rand.New(rand.NewPCG(3, 4))
	const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	out := make([]secretEntry, n)
	for i := range out {
		b := []byte("TOK_")
		for range 28 {
			b = append(b, chars[rnd.IntN(len(chars))])
		}
		out[i] = secretEntry{fmt.Sprintf("S%d", i), string(b)}
	}
	return out
}

// TestRedactLiveSetRegisterDuringMerge: a merge of the recent set into
// the base runs in the background, and a Start that registers a new
// secret meanwhile does not wait for it: with a merge held, the register
// returns, and the secret is redacted at once (it is in the recent set,
// which stays live until the new base is stored, and after).
func TestRedactLiveSetRegisterDuringMerge(t *testing.T) {
	t.Parallel()
	secrets := liveTestTokens(40)
	held, release := make(chan struct{}, 1), make(chan struct{})
	var ss startedSecrets
	ss.mergeHook = func() {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
		ss.wait()
	}()
	// The 17th secret makes the recent set outgrow its bound (16): a
	// merge begins.
	const n = 17
	go func() {
		for i := range n {
			ss.register(secrets[i : i+1])
		}
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatalf("after %d secrets: no merge began within 10s", n)
	}
	redacted := func(e secretEntry) bool {
		var out bytes.Buffer
		r := redaction{live: &ss.sets, count: new(atomic.Int64)}.newRedactor(func(p []byte) { out.Write(p) })
		r.write([]byte("x " + e.value[:7]))
		r.write([]byte(e.value[7:] + " y"))
		r.flush()
		return out.String() == "x [redacted:"+e.name+"] y"
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ss.register(secrets[n : n+1])
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("register during a merge: got no return within 10s, want one at once")
	}
	for _, e := range secrets[:n+1] {
		if !redacted(e) {
			t.Errorf("%s during the merge: got it shown, want it redacted", e.name)
		}
	}
	// Streams that hold the start of a secret when the new base is
	// stored: one registered during the merge (only in the recent set
	// then) and one merged.
	var outs [2]bytes.Buffer
	split := [2]secretEntry{secrets[n], secrets[0]}
	var streams [2]*redactor
	for i := range streams {
		streams[i] = redaction{live: &ss.sets, count: new(atomic.Int64)}.newRedactor(func(p []byte) { outs[i].Write(p) })
		streams[i].write([]byte("x " + split[i].value[:9]))
	}
	base := ss.sets.Load().base
	close(release)
	released = true
	ss.wait()
	for i, r := range streams {
		r.write([]byte(split[i].value[9:] + " y"))
		r.flush()
		if got, want := outs[i].String(), "x [redacted:"+split[i].name+"] y"; got != want {
			t.Errorf("a stream across the new base's store: got %q, want %q", got, want)
		}
	}
	if ss.sets.Load().base == base {
		t.Fatalf("after the merge: got the old base, want a new one")
	}
	// The next register rebuilds the recent set without the merged
	// secrets: a stream holding the start of one passes it to the base.
	var out bytes.Buffer
	r := redaction{live: &ss.sets, count: new(atomic.Int64)}.newRedactor(func(p []byte) { out.Write(p) })
	r.write([]byte("x " + secrets[2].value[:9]))
	ss.register(secrets[n+1 : n+2])
	r.write([]byte(secrets[2].value[9:] + " y"))
	r.flush()
	if got, want := out.String(), "x [redacted:"+secrets[2].name+"] y"; got != want {
		t.Errorf("a stream across the recent set's shrinking: got %q, want %q", got, want)
	}
	for _, e := range secrets[:n+2] {
		if !redacted(e) {
			t.Errorf("%s after the merge: got it shown, want it redacted", e.name)
		}
	}
}

// TestRedactLiveSetEveryMoment: secrets registered from several
// goroutines (past several merges in the background) while streams
// write them: every secret registered is redacted at every moment after
// its register returned, by a stream made before it (written in two
// pieces, the sets possibly changing between them) and by a new one.
func TestRedactLiveSetEveryMoment(t *testing.T) {
	t.Parallel()
	secrets := liveTestTokens(100)
	var ss startedSecrets
	defer ss.wait()
	var mu sync.Mutex
	var registered []secretEntry
	var wg sync.WaitGroup
	const writers = 4
	for w := range writers {
		wg.Go(func() {
			for i := w; i < len(secrets); i += writers {
				ss.register(secrets[i : i+1])
				mu.Lock()
				registered = append(registered, secrets[i])
				mu.Unlock()
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for k := range 2 {
		readers.Go(func() {
			var out bytes.Buffer
			long := redaction{live: &ss.sets, count: new(atomic.Int64)}.newRedactor(func(p []byte) { out.Write(p) })
			// Each value written is checked once at the end: the long
			// stream holds every write, and checking it once per write
			// made the test quadratic (16.8 s).
			written := map[string]bool{}
			for j := 0; ; j++ {
				select {
				case <-stop:
					long.flush()
					text := out.String()
					for v := range written {
						if strings.Contains(text, v) {
							t.Errorf("reader %d, the long stream: got %s shown, want it redacted", k, v)
						}
					}
					return
				default:
				}
				// The readers yield at each round: spinning, two of them
				// held both CPUs of a small machine from the writers, whose
				// registers and merges set the test's length.
				runtime.Gosched()
				mu.Lock()
				if len(registered) == 0 {
					mu.Unlock()
					continue
				}
				e := registered[(j*7+k)%len(registered)]
				mu.Unlock()
				cut := 1 + j%(len(e.value)-1)
				long.write([]byte(" " + e.value[:cut]))
				long.write([]byte(e.value[cut:] + " "))
				written[e.value] = true
				var fresh bytes.Buffer
				r := redaction{live: &ss.sets, count: new(atomic.Int64)}.newRedactor(func(p []byte) { fresh.Write(p) })
				r.write([]byte("x " + e.value + " y"))
				r.flush()
				if got, want := fresh.String(), "x [redacted:"+e.name+"] y"; got != want {
					t.Errorf("reader %d, a new stream: got %q, want %q", k, got, want)
				}
			}
		})
	}
	wg.Wait()
	ss.wait()
	close(stop)
	readers.Wait()
	if got := ss.sets.Load(); got.base == nil {
		t.Errorf("after %d secrets: got no base, want merges", len(secrets))
	}
}
