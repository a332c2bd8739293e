package agentproc

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math/bits"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/xerrors"
)

// Redaction replaces the values of secrets in a process's output with
// "[redacted:NAME]" before any byte of it reaches the buffer, the output
// log or a detached process's files, so every reader sees the same
// redacted bytes. It is protection against accidental disclosure (a `cat
// .env`, a test that prints DATABASE_URL, `env`), not against a command
// that transforms a secret on purpose (that is the sandbox's business).
//
// Each secret is looked for in the forms it commonly reaches output in:
//
//   - raw, and with "\n" as "\r\n" (a terminal's ONLCR);
//   - base64, standard and URL alphabets, padded or not, at any of the
//     three alignments inside a longer encoded run: for each alignment
//     the characters every one of whose 6 bits come from the secret (the
//     stable core) are looked for. Up to two characters at either edge of
//     the core mix secret bits with the neighbouring bytes' and are kept;
//     they carry at most 4 bits of the secret each;
//   - percent-encoded (query and path escaping, and every byte but
//     letters and digits escaped; upper- and lower-case hex);
//   - JSON-string-escaped (Go's escaping with and without HTML escapes,
//     ASCII-only \u escapes, "/" as "\/");
//   - hex, lower and upper case;
//   - base64 and hex wrapped across lines (matchWrapped);
//   - any of these as PlainText shows it: escape sequences, string
//     sequences (OSC, DCS, ...) and controls PlainText removes inside it
//     skipped (the shown stages, stripEscapes).
//
// The stage is streaming: a write is scanned as it arrives, and the run
// of form bytes at its end, or the tail that could still begin some form
// of some secret across a line break, is held back until a later write
// decides it, or the output ends (pendingFrom).
// Nothing is released on a timer, so a command that prints a secret one
// byte at a time never leaks it piece by piece.
//
// The matcher (redactSet) samples the data every `step` bytes: every
// pattern is at least minLen bytes long, so any occurrence contains a
// sampled position within its first step bytes, and the 4-byte gram there
// is looked up in a bitset of the grams every pattern has at offsets
// [0, step). Only a hit is verified. Without secrets in the output the
// scan costs one load, one multiply and one bit test per step bytes, and
// the shown stages one pass over the write for a byte a terminal hides
// (hiddenIndex), eight bytes at a time.

// Limits on secrets, checked by WithSecrets and Request.Secrets.
const (
	// MinSecretBytes is the shortest secret value redaction accepts: a
	// shorter one would match ordinary words and numbers, and its base64
	// core would be shorter still.
	MinSecretBytes = 8
	// MaxSecretBytes is the longest secret value (a PEM private key fits).
	MaxSecretBytes = 8 << 10
	// MaxSecrets is the most secrets WithSecrets, and separately one
	// Request.Secrets, may name.
	MaxSecrets = 1024
	// maxSecretName bounds a secret's name, which output shows.
	maxSecretName = 64
)

// redactGram is the gram length the filter samples.
const redactGram = 4

// maxRedactStep bounds the sampling step, and so the filter's size.
// It is also what makes a form wrapped across lines findable: at 27, a
// line break leaves a piece of at least step+3 = 30 characters (in
// which a sample falls on a whole gram) in every 60-column line (xxd -p;
// PEM is 64, base64 76).
const maxRedactStep = 27

// wrapGap is the fewest characters of a form between two line breaks
// the matcher skips inside it: a wrapped encoding has a full line between
// breaks, and the bound keeps what an occurrence spans, and so what a
// stream holds back, within window.
const wrapGap = 16

// The first-level filter: 2^redactNearLog bits.
const (
	redactNearLog   = 17
	redactNearWords = 1 << (redactNearLog - 6)
	redactNearMul   = 0x9E3779B1
	redactFarMul    = 0x85EBCA77
)

// secretEntry is one named secret.
type secretEntry struct{ name, value string }

// validateSecrets checks named secrets (WithSecrets, Request.Secrets);
// what names the map in errors.
func validateSecrets(what string, secrets map[string]string) error {
	if len(secrets) == 0 {
		return nil
	}
	if len(secrets) > MaxSecrets {
		return xerrors.Errorf("%s: %d secrets, at most %d: %w", what, len(secrets), MaxSecrets, ErrInvalidRequest)
	}
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		if err := checkSecretName(name); err != nil {
			return xerrors.Errorf("%s: %v: %w", what, err, ErrInvalidRequest)
		}
		// The value is never echoed, only its length.
		switch n := len(secrets[name]); {
		case n < MinSecretBytes:
			return xerrors.Errorf("%s: secret %q is %d bytes, at least %d are needed: %w", what, name, n, MinSecretBytes, ErrInvalidRequest)
		case n > MaxSecretBytes:
			return xerrors.Errorf("%s: secret %q is %d bytes, at most %d are allowed: %w", what, name, n, MaxSecretBytes, ErrInvalidRequest)
		}
	}
	return nil
}

// checkSecretName allows 1 to 64 letters, digits, '_', '.' and '-': the
// name is shown in output as [redacted:NAME].
func checkSecretName(name string) error {
	if name == "" {
		return xerrors.New("empty secret name")
	}
	if len(name) > maxSecretName {
		return xerrors.Errorf("secret name %q is longer than %d bytes", name[:maxSecretName]+"...", maxSecretName)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return xerrors.Errorf("secret name %q: only letters, digits, '_', '.' and '-' are allowed", name)
		}
	}
	return nil
}

// envSecrets returns the entries of env (KEY=VALUE strings, or a map when
// env is nil) whose names look like secrets (looksSecret) and whose
// values redaction accepts; others are skipped silently.
func envSecrets(env []string) []secretEntry {
	var out []secretEntry
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out = appendEnvSecret(out, k, v)
		}
	}
	return out
}

// appendEnvSecret appends what of variable name=value is redacted by
// default: the value when the name looks like a secret, and the password
// of a URL with one (DATABASE_URL=postgres://app:PASSWORD@db/app), whose
// name rarely does.
func appendEnvSecret(out []secretEntry, name, value string) []secretEntry {
	if secretAcceptable(name, value) {
		out = append(out, secretEntry{name, value})
	}
	if pw := urlPassword(value); pw != "" && pw != value && len(pw) >= MinSecretBytes && len(pw) <= MaxSecretBytes && checkSecretName(name) == nil {
		out = append(out, secretEntry{name, pw})
	}
	return out
}

// urlPassword returns the password of value read as a URL with
// credentials (scheme://user:password@host...), or, for a URL whose user
// comes alone and looks like a token (userLooksToken), that user
// (https://TOKEN@github.com/owner/repo.git, a form GitHub documents;
// noticed by the thirteenth attack review); else "".
func urlPassword(value string) string {
	if !strings.Contains(value, "://") || !strings.Contains(value, "@") {
		return "" // cheap: most values are not such URLs
	}
	u, err := url.Parse(strings.TrimSpace(value))
	if err != nil || u.User == nil {
		return ""
	}
	if pw, ok := u.User.Password(); ok {
		return pw
	}
	if user := u.User.Username(); userLooksToken(user) {
		return user
	}
	return ""
}

// userLooksToken reports whether a URL's user, given without a password,
// is taken for a token rather than a name: 20 bytes or more of letters,
// digits, '_' and '-' with both a letter and a digit (ghp_..., glpat-...,
// a hex or base64url key). A login name ("git", "deploy",
// "first.last") is left alone: redacting it would blank that text in
// every stream.
func userLooksToken(user string) bool {
	if len(user) < 20 {
		return false
	}
	letter, digit := false, false
	for _, c := range []byte(user) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letter = true
		case c >= '0' && c <= '9':
			digit = true
		case c == '_' || c == '-':
		default:
			return false
		}
	}
	return letter && digit
}

func secretAcceptable(name, value string) bool {
	return len(value) >= MinSecretBytes && len(value) <= MaxSecretBytes &&
		checkSecretName(name) == nil && looksSecret(name)
}

// hostSecrets is the default set: the host's secret-looking variables.
func hostSecrets() []secretEntry { return envSecrets(os.Environ()) }

// requestSecrets is what one Request adds to the Manager's set: its
// Secrets, and, unless they are off, the secret-looking values of its
// sandbox's Env.Set (set is sandboxEnvSet's: the Manager's default
// policy's), which reach the tree's environment, where `env` prints them
// (fifth attack review: Env.Set's were not redacted). Those of its Env and
// of its own Sandbox's Env.Set, which reach it too, go to its owner's set
// (envOwnerSecrets).
func requestSecrets(req Request, set map[string]string, envDefaults bool) []secretEntry {
	if len(req.Secrets) == 0 && (!envDefaults || len(set) == 0) {
		return nil
	}
	var out []secretEntry
	for _, k := range slices.Sorted(maps.Keys(req.Secrets)) {
		out = append(out, secretEntry{k, req.Secrets[k]})
	}
	if envDefaults {
		for _, k := range slices.Sorted(maps.Keys(set)) {
			out = appendEnvSecret(out, k, set[k])
		}
	}
	return out
}

// sandboxEnvSet is the Env.Set that goes to the Manager's set: the
// Manager's default policy's (the operator's, fixed for the Manager's
// life), whatever policy req runs under; nil without one. A request's own
// Sandbox's Env.Set goes with its Env to its owner's set
// (envOwnerSecrets): httpapi takes it from its client (sandbox.env_set,
// merged by Sandbox.Narrow), and in the Manager's set it blanked one
// owner's value in every owner's output and grew every stream without
// bound (seventeenth attack review, TestAttackEnvSetSecretsEveryOwner).
func (m *Manager) sandboxEnvSet(Request) map[string]string {
	if m.cfg.sandbox == nil {
		return nil
	}
	return m.cfg.sandbox.Env.Set
}

// secretForms returns the forms of v the matcher looks for, raw first,
// without duplicates.
func secretForms(v string) []string {
	var out []string
	for _, f := range redactForms(v) {
		out = append(out, f.text)
	}
	return out
}

// redactForm is one form of a secret; wrap says the form is an encoding
// that tools wrap across lines (base64, hex), so line breaks between its
// characters are skipped when matching it.
type redactForm struct {
	text string
	wrap bool
}

// redactForms returns the forms of v, raw first, without duplicates.
func redactForms(v string) []redactForm {
	var forms []redactForm
	add := func(f string, wrap bool) {
		if len(f) >= MinSecretBytes && !slices.ContainsFunc(forms, func(g redactForm) bool { return g.text == f }) {
			forms = append(forms, redactForm{f, wrap})
		}
	}
	add(v, false)
	if strings.Contains(v, "\n") {
		add(strings.ReplaceAll(strings.ReplaceAll(v, "\r\n", "\n"), "\n", "\r\n"), false)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for r := range 3 {
			add(base64Core(enc, v, r), true)
		}
	}
	// Hex, as xxd -p, od and hex dumps in logs print it.
	add(hex.EncodeToString([]byte(v)), true)
	add(strings.ToUpper(hex.EncodeToString([]byte(v))), true)
	for _, f := range []string{url.QueryEscape(v), url.PathEscape(v), escapeAllButAlnum(v)} {
		add(f, false)
		add(lowerHexEscapes(f, '%', 2), false)
	}
	for _, f := range jsonForms(v) {
		add(f, false)
		add(strings.ReplaceAll(f, "/", `\/`), false)
	}
	return forms
}

// base64Core returns the characters of the base64 encoding of v, preceded
// by r bytes of anything, that depend on v's bits alone: character i
// covers bits [6i, 6i+6), and v is bits [8r, 8(r+len(v))).
func base64Core(enc *base64.Encoding, v string, r int) string {
	s := enc.EncodeToString(append(make([]byte, r), v...))
	from := (8*r + 5) / 6
	to := 8 * (r + len(v)) / 6
	return s[from:to]
}

// escapeAllButAlnum percent-encodes every byte but ASCII letters and
// digits, as some encoders do.
func escapeAllButAlnum(v string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for _, c := range []byte(v) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// lowerHexEscapes lower-cases the n hex digits after each esc byte.
func lowerHexEscapes(s string, esc byte, n int) string {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		if b[i] == esc {
			for j := i + 1; j <= i+n && j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'F' {
					b[j] += 'a' - 'A'
				}
			}
			i += n
		}
	}
	return string(b)
}

// jsonForms returns v as the inside of a JSON string, the ways common
// encoders write it.
func jsonForms(v string) []string {
	var forms []string
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(html)
		if e.Encode(v) == nil {
			s := strings.TrimSuffix(b.String(), "\n")
			forms = append(forms, s[1:len(s)-1])
		}
	}
	// ASCII only, as Python's json.dumps and others write it; invalid
	// UTF-8 has no such form.
	if utf8.ValidString(v) {
		var b strings.Builder
		const hex = "0123456789abcdef"
		u := func(r rune) {
			b.WriteString(`\u`)
			for sh := 12; sh >= 0; sh -= 4 {
				b.WriteByte(hex[(r>>sh)&15])
			}
		}
		for _, r := range v {
			switch {
			case r == '"' || r == '\\':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\r':
				b.WriteString(`\r`)
			case r == '\t':
				b.WriteString(`\t`)
			case r < 0x20 || r == 0x7f:
				u(r)
			case r < 0x80:
				b.WriteRune(r)
			case r >= 0x10000:
				r -= 0x10000
				u(0xd800 + (r>>10)&0x3ff)
				u(0xdc00 + r&0x3ff)
			default:
				u(r)
			}
		}
		forms = append(forms, b.String())
	}
	return forms
}

// redactSet is a compiled set of secrets: immutable once built, shared by
// every process it applies to.
type redactSet struct {
	entries []secretEntry // what it was built from
	pats    [][]byte      // every form of every secret
	repl    [][]byte      // pats[i] is replaced by repl[i]
	wrap    []bool        // wrap[i]: pats[i] may have line breaks inside (redactForm.wrap)
	minLen  int
	maxLen  int
	step    int // sampling step: minLen-redactGram+1, at most maxRedactStep
	// reach is how far past an occurrence's start its sampled gram may
	// lie: step, or for a wrapped form, a piece after a line break.
	reach int
	// window is the most bytes an occurrence spans, less one: maxLen-1,
	// plus the line breaks a wrapped form may hold.
	window int
	// near and bits are two bitsets of the grams at offsets [0, step) of
	// each pattern, hashed two ways: near is small enough to stay in the
	// L1 cache beside the data (16 KiB), bits is sized for few false hits
	// and read only after near says yes.
	near  *[redactNearWords]uint64
	bits  []uint64
	shift uint32 // 32 - log2(len(bits)*64)
	// refs lists (pattern, offset) for every gram, grouped by gram;
	// grams maps a gram to its group, start<<32|length. Neither holds
	// a pointer, so a large set costs the garbage collector nothing.
	refs    []gramRef
	grams   map[uint32]uint64
	trie    map[uint64]int32 // node<<8|byte → child; node 0 is the root
	depthOf []int32          // index: node; pattern length ending there, or 0
	hasKids []bool           // index: node
	// wrapAt[node]: a wrapped form passes through node and goes on, so
	// a line break may follow it.
	wrapAt []bool
	// inForm marks the bytes of every pattern but line breaks: a tail
	// of them is held back whether or not it begins a secret
	// (pendingFrom).
	inForm [256]bool
}

// gramRef says pattern pat has the gram at offset off.
type gramRef struct {
	pat int32
	off int32
}

// newRedactSet compiles entries; nil when there is nothing to redact.
// An earlier entry's name wins for a value (or form) two entries share.
func newRedactSet(entries []secretEntry) *redactSet {
	if len(entries) == 0 {
		return nil
	}
	s := &redactSet{entries: entries}
	seen := map[string]bool{}
	maxWrap := 0
	for _, e := range entries {
		repl := []byte("[redacted:" + e.name + "]")
		for _, f := range redactForms(e.value) {
			if seen[f.text] {
				continue
			}
			seen[f.text] = true
			s.pats = append(s.pats, []byte(f.text))
			for _, c := range []byte(f.text) {
				s.inForm[c] = c != '\n' && c != '\r'
			}
			s.repl = append(s.repl, repl)
			s.wrap = append(s.wrap, f.wrap)
			if f.wrap {
				maxWrap = max(maxWrap, len(f.text))
			}
		}
	}
	if len(s.pats) == 0 {
		return nil
	}
	s.minLen, s.maxLen = len(s.pats[0]), 0
	for _, p := range s.pats {
		s.minLen, s.maxLen = min(s.minLen, len(p)), max(s.maxLen, len(p))
	}
	s.step = min(s.minLen-redactGram+1, maxRedactStep)
	s.reach, s.window = s.step, s.maxLen-1
	if maxWrap > 0 {
		// A wrapped form is anchored in the first piece of at least
		// step+3 characters: one begins within step+3 of its start.
		s.reach = 2*s.step + 5
		s.window += 2 * (maxWrap/wrapGap + 1)
	}
	nGrams := 0
	for i, p := range s.pats {
		nGrams += s.anchors(i, p)
	}
	logBits := uint(16)
	for logBits < 24 && 1<<logBits < nGrams*64 {
		logBits++
	}
	s.near = new([redactNearWords]uint64)
	s.bits = make([]uint64, 1<<(logBits-6))
	s.shift = uint32(32 - logBits)
	// The trie has at most one node per pattern byte besides its root:
	// sized for that once, its map and slices are not grown (the map
	// rehashed) while it is built, which was a quarter of a set's build
	// (a set is built at each secret registered: fourth mend,
	// TestRedactLiveSetRandom).
	nodes := 1
	for _, p := range s.pats {
		nodes += len(p)
	}
	s.trie = make(map[uint64]int32, nodes)
	s.depthOf, s.hasKids, s.wrapAt = make([]int32, 1, nodes), make([]bool, 1, nodes), make([]bool, 1, nodes)
	byGram := make(map[uint32][]gramRef, nGrams)
	for i, p := range s.pats {
		for off := range s.anchors(i, p) {
			g := binary.LittleEndian.Uint32(p[off:])
			n := (g * redactNearMul) >> (32 - redactNearLog)
			s.near[n>>6] |= 1 << (n & 63)
			h := s.hash(g)
			s.bits[h>>6] |= 1 << (h & 63)
			byGram[g] = append(byGram[g], gramRef{int32(i), int32(off)})
		}
		node := int32(0)
		for j, c := range p {
			key := uint64(node)<<8 | uint64(c)
			next, ok := s.trie[key]
			if !ok {
				next = int32(len(s.depthOf))
				s.trie[key] = next
				s.depthOf = append(s.depthOf, 0)
				s.hasKids = append(s.hasKids, false)
				s.wrapAt = append(s.wrapAt, false)
				s.hasKids[node] = true
			}
			node = next
			if s.wrap[i] && j+1 < len(p) {
				s.wrapAt[node] = true
			}
		}
		s.depthOf[node] = int32(i + 1) // pattern index + 1
	}
	s.refs = make([]gramRef, 0, nGrams)
	s.grams = make(map[uint32]uint64, len(byGram))
	for g, refs := range byGram {
		s.grams[g] = uint64(len(s.refs))<<32 | uint64(len(refs))
		s.refs = append(s.refs, refs...)
	}
	return s
}

func (s *redactSet) hash(g uint32) uint32 { return (g * redactFarMul) >> s.shift }

// anchors returns how many of pattern i's first grams (p is the
// pattern) the filter knows: step for most; for a wrapped form also
// those of a piece that follows a line break within step+3 of its
// start, where its first piece is too short to hold a sample.
func (s *redactSet) anchors(i int, p []byte) int {
	if !s.wrap[i] {
		return s.step
	}
	return min(len(p)-redactGram+1, 2*s.step+3)
}

// proper reports whether data is a proper prefix of some pattern: the
// trie walk consumes all of it and more could follow.
// data[t:] is the tail; prev is what was emitted before data. A line
// break inside a wrapped form is skipped as matchWrapped does.
func (s *redactSet) proper(data []byte, t int, prev []byte) bool {
	node := int32(0)
	depth, lastBreak := 0, -wrapGap
	for k := t; k < len(data); k++ {
		c := data[k]
		next, ok := s.trie[uint64(node)<<8|uint64(c)]
		if !ok {
			if !s.wrapAt[node] || depth-lastBreak < wrapGap || !encodedBefore(data, k, prev) {
				return false
			}
			switch {
			case c == '\n':
			case c == '\r' && k+1 == len(data):
			case c == '\r' && data[k+1] == '\n':
				k++
			default:
				return false
			}
			lastBreak = depth
			continue
		}
		node = next
		depth++
	}
	return s.hasKids[node]
}

// matchWrapped reports whether wrapped form pat occurs in data with its
// byte off at data[i], and where: data[start:end]. A line break ("\n",
// "\r\n") is skipped between its characters where a wrapped dump has
// one: not before its first, at least wrapGap characters after another,
// and after a line of at least wrapGap characters of an encoding
// (encodedBefore; prev is what was emitted before data). False also when
// data ends before the form does.
func matchWrapped(data, pat []byte, i, off int, prev []byte) (start, end int, ok bool) {
	// Back to the start, then the whole form forward, where the rule on
	// breaks is checked.
	k := i - 1
	for j := off - 1; j >= 0; {
		switch {
		case k < 0:
			return 0, 0, false
		case data[k] == pat[j]:
			j--
			k--
		case data[k] == '\n' && k+1 < len(data) && data[k+1] != '\n':
			k--
			if k >= 0 && data[k] == '\r' {
				k--
			}
		default:
			return 0, 0, false
		}
	}
	start, k = k+1, k+1
	lastBreak := -wrapGap
	for j := 0; j < len(pat); {
		switch {
		case k >= len(data):
			return 0, 0, false
		case data[k] == pat[j]:
			j++
			k++
		case j == 0 || j-lastBreak < wrapGap || !encodedBefore(data, k, prev):
			return 0, 0, false
		case data[k] == '\n':
			k++
			lastBreak = j
		case data[k] == '\r' && k+1 < len(data) && data[k+1] == '\n':
			k += 2
			lastBreak = j
		default:
			return 0, 0, false
		}
	}
	return start, k, true
}

// encodedBefore reports whether the wrapGap bytes before data[k] (then
// the end of prev) are all characters of base64 or hex: a line of a
// wrapped dump, not text that happens to end in the start of a form
// (which would otherwise be held back at every line end).
func encodedBefore(data []byte, k int, prev []byte) bool {
	for j := k - 1; j >= k-wrapGap; j-- {
		var c byte
		switch {
		case j >= 0:
			c = data[j]
		case len(prev)+j >= 0:
			c = prev[len(prev)+j]
		default:
			return false
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_' || c == '=') {
			return false
		}
	}
	return true
}

// pendingFrom returns the first position t >= from, within window of
// the end, from which what is held back starts: len(data) if nothing is.
// prev is what was emitted before data.
//
// Held back is the tail that could still become a pattern, and also the
// whole run of bytes of the set's forms (inForm) at the end, whether it
// begins a secret or not: what is held must not say whether a tail
// begins a secret. Otherwise a command could end a write with a guess
// at a secret's next character and a reader learn from whether it shows
// before the next write which guess was right, a character at a time
// (TestRedactAttackHoldBackOracle). A tail that begins a secret across a
// line break is still held by itself; guessing it takes a whole line.
func (s *redactSet) pendingFrom(data []byte, from int, prev []byte) int {
	lo := max(from, len(data)-s.window)
	run := len(data)
	for run > max(lo, len(data)-s.maxLen+1) && s.inForm[data[run-1]] {
		run--
	}
	for t := lo; t < run; t++ {
		if s.proper(data, t, prev) {
			return t
		}
	}
	return run
}

// redaction is what applies to one process's output: fixed sets (either
// may be nil), then, when live is set, the newest sets it points to,
// counted in count. For a Manager's process the fixed set is the
// Manager's (host and WithSecrets) and live is startedSecrets.sets: the
// secrets of every request the Manager has started, its own included.
// owner, when set, is read as live is, after it: for a Manager's
// process, the set of its owner's started requests' Env secrets
// (ownerSecrets). A detached process's runner has one fixed set and no
// live one.
type redaction struct {
	sets  [2]*redactSet
	live  *atomic.Pointer[liveSets]
	owner *atomic.Pointer[liveSets]
	count *atomic.Int64
}

// lives returns rd's live pointers that are set, live first.
func (rd redaction) lives() []*atomic.Pointer[liveSets] {
	var out []*atomic.Pointer[liveSets]
	for _, l := range []*atomic.Pointer[liveSets]{rd.live, rd.owner} {
		if l != nil {
			out = append(out, l)
		}
	}
	return out
}

// liveSets is what startedSecrets holds at one time, in two sets so that
// a new secret does not rebuild them all: base, built from every entry now
// and then in the background, and recent, rebuilt at each new one from
// those not in base. Either may be nil. Immutable once stored.
type liveSets struct {
	recent, base *redactSet
}

// startedSecrets is the set of the secrets of every request a Manager has
// started (processSecrets): a secret one tree holds can reach another
// tree of the same Manager without passing through the holder's output
// (its /proc/PID/cmdline, a file it writes, a socket), so every stream
// redacts all of them (seventh attack review,
// TestAttackSecretOfAnotherRequestByCmdline). The set only grows while
// the Manager lives: a reaped holder's secret can still be printed by a
// reader that copied it, or by a file it left. The zero value is ready;
// wait ends its background work.
type startedSecrets struct {
	// sets is read by every stream once per write (an atomic load); it
	// is replaced, never changed, under mu.
	sets    atomic.Pointer[liveSets]
	mu      sync.Mutex
	entries []secretEntry        // in order of registration
	known   map[secretEntry]bool // entries as a set
	values  map[string]int       // how many entries have each value
	inBase  int                  // entries[:inBase] are in the base set
	merging bool                 // a merge runs (merge)
	merges  sync.WaitGroup
	// group, when set (an owner's set), counts the merges in place of
	// merges, so that the Manager waits for those of sets it dropped.
	group *sync.WaitGroup
	// mergeHook, when set (tests, before the first register), is called
	// by each merge before it builds its set.
	mergeHook func()
	// An owner's set (ownerSecrets) is bounded and lets entries go
	// (hold): bytes is the entries' value bytes, holds how many running
	// processes carry each, used when each was last held (a count of
	// holds, useSeq), gen how many times entries were let go.
	bytes  int
	holds  map[secretEntry]int
	used   map[secretEntry]uint64
	useSeq uint64
	gen    uint64
}

// register adds entries to the sets before the process that holds them
// exists, so no tree can read one before every stream redacts it.
//
// Building a set costs about its number of secrets (0.4 ms each, most of
// it in the maps of the index and the trie), so rebuilding one set of
// every secret at each new one cost 0.4 s a Start at 1,000. The recent
// set is rebuilt instead, and merged into the base once it holds more
// than twice the square root of the base's secrets (at least 16): a
// stream pays for two sets' stages, not one per secret. The merge runs in
// the background (merge), so a Start pays for the recent set alone, never
// for the base (it used to wait 0.56 s behind a merge at 1,000 secrets):
// O(sqrt n) while no merge runs, plus the secrets registered during a
// merge while one does (BenchmarkRedactRegister, BenchmarkRedactLiveSecrets).
func (ss *startedSecrets) register(entries []secretEntry) {
	if len(entries) == 0 {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.addLocked(entries)
}

// addLocked adds the entries not yet known and stores a new recent set
// when there were any.
func (ss *startedSecrets) addLocked(entries []secretEntry) {
	added := false
	for _, e := range entries {
		if ss.known[e] {
			continue
		}
		if ss.known == nil {
			ss.known = map[secretEntry]bool{}
		}
		ss.known[e] = true
		ss.addValueLocked(e.value)
		ss.entries = append(ss.entries, e)
		ss.bytes += len(e.value)
		added = true
	}
	if !added {
		return
	}
	// Built under mu so that sets are stored in the order their entries
	// were registered: a slower build of an older set never replaces a
	// newer one. It is CPU only, no system call. The recent set holds
	// every entry the stored base does not, those a merge is putting
	// into the next base among them: it stays live until that base is.
	cur := ss.sets.Load()
	if cur == nil {
		cur = &liveSets{}
	}
	ss.sets.Store(&liveSets{base: cur.base, recent: newRedactSet(slices.Clone(ss.entries[ss.inBase:]))})
	ss.startMergeLocked()
}

// addValueLocked counts one more entry of value v (values).
func (ss *startedSecrets) addValueLocked(v string) {
	if ss.values == nil {
		ss.values = map[string]int{}
	}
	ss.values[v]++
}

// hasValues reports, for each of values, whether an entry of ss has it.
func (ss *startedSecrets) hasValues(values []string) []bool {
	out := make([]bool, len(values))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for i, v := range values {
		out[i] = ss.values[v] > 0
	}
	return out
}

// startMergeLocked starts a merge of every entry into a new base set when
// the recent set has outgrown its bound and no merge runs.
func (ss *startedSecrets) startMergeLocked() {
	if ss.merging || len(ss.entries)-ss.inBase <= max(16, 2*isqrt(ss.inBase)) {
		return
	}
	ss.merging = true
	// entries only grows by append: its first n elements are never
	// written again, so the merge reads them without mu.
	n := len(ss.entries)
	upto, gen := ss.entries[:n:n], ss.gen
	ss.mergeGroup().Go(func() { ss.merge(upto, gen) })
}

// merge builds a base set of entries, the first len(entries) registered,
// outside mu, and stores it in place of the base. With it goes no recent
// set when nothing was registered meanwhile, else the recent set stored
// last: that one holds every entry registered since the old base, those
// of the new base and those registered while it was built, so at every
// moment each registered secret is in a stored set. The next
// registration rebuilds the recent set of the entries not in this base;
// until then a stream matches those twice, which is harmless. Building a
// recent set here would cost every Start waiting on mu meanwhile.
//
// gen is ss.gen when the merge started: when an owner's set let entries
// go meanwhile (letGoLocked), entries holds some of them and the set
// stored then holds every entry left, so the merge stores nothing.
func (ss *startedSecrets) merge(entries []secretEntry, gen uint64) {
	if ss.mergeHook != nil {
		ss.mergeHook()
	}
	base := newRedactSet(slices.Clone(entries))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.gen != gen {
		ss.merging = false
		ss.startMergeLocked()
		return
	}
	recent := ss.sets.Load().recent
	if len(ss.entries) == len(entries) {
		recent = nil // all in the base: a stream runs one set's stages
	}
	ss.sets.Store(&liveSets{base: base, recent: recent})
	ss.inBase = len(entries)
	ss.merging = false
	ss.startMergeLocked() // the recent set may have outgrown its bound meanwhile
}

// wait returns once no merge runs; the Manager's Shutdown calls it after
// the last Start has ended.
func (ss *startedSecrets) wait() { ss.mergeGroup().Wait() }

// mergeGroup is what counts ss's merges: group when set, else merges.
func (ss *startedSecrets) mergeGroup() *sync.WaitGroup {
	if ss.group != nil {
		return ss.group
	}
	return &ss.merges
}

// isqrt is the integer square root of n >= 0.
func isqrt(n int) int {
	r := 0
	for (r+1)*(r+1) <= n {
		r++
	}
	return r
}

// validateRedaction checks WithSecrets and req.Secrets (validate's step 3).
func (m *Manager) validateRedaction(req Request) error {
	if m.cfg.secretsErr != nil {
		return m.cfg.secretsErr
	}
	return validateSecrets("Request.Secrets", req.Secrets)
}

// redactionFor returns what redacts p's output under req; env is the
// environment p was started with (nil for one recovered).
func (m *Manager) redactionFor(p *Process, req Request, env []string) redaction {
	if m.cfg.noRedaction {
		return redaction{}
	}
	// req's own secrets were registered before its process existed
	// (registerSecrets, holdOwnerSecrets); a recovered process has none
	// this Manager knows. The owner's set is read after the Manager's.
	return redaction{
		sets:  [2]*redactSet{m.redact},
		live:  &m.started.sets,
		owner: m.ownerLive(p.owner),
		count: &p.state.redactions,
	}
}

// registerSecrets adds the secrets of a process about to be started with
// req and env to the set every stream of m redacts. Call it before the
// process exists.
func (m *Manager) registerSecrets(req Request, env []string) {
	if m.cfg.noRedaction {
		return
	}
	m.started.register(m.processSecrets(req, env))
}

// processSecrets is what a process started with req and env adds to the
// Manager's set: requestSecrets, and with a WithEnv hook the secret-looking
// variables of env the host's environment does not hold: the hook's are
// the host's for this process (a token it fetches), which `env` in an
// unsandboxed tree printed unredacted (fifth attack review). Without a
// hook env holds nothing more, and is not read.
func (m *Manager) processSecrets(req Request, env []string) []secretEntry {
	out := requestSecrets(req, m.sandboxEnvSet(req), true)
	if m.cfg.envHook == nil || len(env) == 0 {
		return out
	}
	// Neither the host's values nor req.Env's (its owner's set has those)
	// are the hook's.
	host := map[string]bool{}
	if m.redact != nil {
		for _, e := range m.redact.entries {
			host[e.value] = true
		}
	}
	for _, e := range envOwnerSecrets(req) {
		host[e.value] = true
	}
	for _, e := range envSecrets(env) {
		if !host[e.value] {
			out = append(out, e)
		}
	}
	return out
}

// redactString returns s redacted as output is, for what a tree puts in
// Info other than its output (a denial's target). Not counted in
// Info.Redactions, which counts the output's.
func (rd redaction) redactString(s string) string {
	empty := rd.sets == [2]*redactSet{}
	for _, lp := range rd.lives() {
		empty = empty && lp.Load() == nil
	}
	if empty {
		return s
	}
	var b strings.Builder
	r := redaction{sets: rd.sets, live: rd.live, owner: rd.owner, count: new(atomic.Int64)}.newRedactor(func(p []byte) { b.Write(p) })
	r.write([]byte(s))
	r.flush()
	return b.String()
}

// redactHost is redactString for a host name, which DNS, and so the
// tools that print or pass one on, compare without regard to case: curl
// and the proxy see https://$TOKEN.example/ in lower case. Raw values
// are also looked for in any case.
func (rd redaction) redactHost(s string) string {
	s = rd.redactString(s)
	sets := rd.sets[:]
	for _, lp := range rd.lives() {
		if l := lp.Load(); l != nil {
			sets = append(sets, l.recent, l.base)
		}
	}
	for _, set := range sets {
		if set == nil {
			continue
		}
		for _, e := range set.entries {
			for i := 0; i+len(e.value) <= len(s); i++ {
				if strings.EqualFold(s[i:i+len(e.value)], e.value) {
					s = s[:i] + "[redacted:" + e.name + "]" + s[i+len(e.value):]
					i += len("[redacted:"+e.name+"]") - 1
				}
			}
		}
	}
	return s
}

// shownWorkDir is dir, the work dir of a process started with req by
// owner, as Info and the state record show it: redacted as output is,
// with every secret of the Manager, of the requests started so far and
// of owner's started set (req's are
// registered before its spawn). A work dir with ".." is resolved through
// links a tree may have made (resolveWorkDir), so it can carry text the
// tree wrote, a directory named by a secret (thirteenth attack review,
// TestAttackWorkDirCarriesSecret); any other is the caller's or the
// operator's string, shown as it is (the redaction costs 4 to 14 µs with
// secrets, measured, which a Start without ".." does not pay).
func (m *Manager) shownWorkDir(req Request, owner, dir string) string {
	if m.cfg.noRedaction || !hasDotDot(req.WorkDir) {
		return dir
	}
	return redaction{sets: [2]*redactSet{m.redact}, live: &m.started.sets, owner: m.owned.peek(owner)}.redactString(dir)
}

// redactEntriesFor returns every secret redacted in the output of a
// process started with req, for a detached process's runner; nil when
// redaction is off or there is none.
func (m *Manager) redactEntriesFor(req Request, env []string) []secretEntry {
	if m.cfg.noRedaction {
		return nil
	}
	var out []secretEntry
	if m.redact != nil {
		out = append(out, m.redact.entries...)
	}
	out = append(out, m.processSecrets(req, env)...)
	return append(out, envOwnerSecrets(req)...)
}

// wireSecret is a secret as the host hands it to a detached process's
// runner: JSON on the runner's stdin, the value as bytes (base64), since
// a JSON string cannot carry invalid UTF-8.
type wireSecret struct {
	Name  string `json:"n"`
	Value []byte `json:"v"`
}

// encodeSecrets is what the host writes to the runner.
func encodeSecrets(entries []secretEntry) []byte {
	wire := make([]wireSecret, len(entries))
	for i, e := range entries {
		wire[i] = wireSecret{e.name, []byte(e.value)}
	}
	data, _ := json.Marshal(wire)
	return data
}

// decodeSecrets is encodeSecrets' inverse, checking what it reads as
// WithSecrets does (the runner trusts nothing it reads).
func decodeSecrets(data []byte) (*redactSet, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var wire []wireSecret
	if err := json.Unmarshal(data, &wire); err != nil {
		return nil, err
	}
	entries := make([]secretEntry, 0, len(wire))
	for _, w := range wire {
		if err := checkSecretName(w.Name); err != nil {
			return nil, err
		}
		if len(w.Value) < MinSecretBytes || len(w.Value) > MaxSecretBytes {
			return nil, xerrors.Errorf("secret %q: bad length %d", w.Name, len(w.Value))
		}
		entries = append(entries, secretEntry{w.Name, string(w.Value)})
	}
	return newRedactSet(entries), nil
}

// redactor is one stream's redaction stage: for each set, a stage that
// matches the bytes as they are, then one that matches them as a
// terminal shows them (without escape sequences), each holding back its
// own tail. Its methods are called by the one goroutine that copies the
// output; a nil redactor passes everything straight to emit.
type redactor struct {
	stages []*redactStage
	emit   func([]byte)
	// lives is redaction.lives; liveSets[k] the sets the k-th group of
	// six live stages after the fixed ones (three for recent, then three
	// for base) applies, a nil set's stages passing everything through.
	lives    []*atomic.Pointer[liveSets]
	liveSets []liveSets
	// plain says no byte the stages see during this write is hidden
	// from a terminal (hiddenIndex): neither the write's nor any held
	// back. The shown stages then pass what they get: looked for once
	// per write, not once per shown stage.
	plain bool
}

// newRedactor returns a redactor writing to emit.
func (rd redaction) newRedactor(emit func([]byte)) *redactor {
	r := &redactor{emit: emit, lives: rd.lives()}
	next := emit
	sets := rd.sets[:]
	// The live stages come last and always exist, passing through while
	// their set is nil.
	r.liveSets = make([]liveSets, len(r.lives))
	for k, lp := range r.lives {
		if l := lp.Load(); l != nil {
			r.liveSets[k] = *l
		}
		sets = append(sets, r.liveSets[k].recent, r.liveSets[k].base)
	}
	for i := len(sets) - 1; i >= 0; i-- {
		if sets[i] == nil && i < len(rd.sets) {
			continue
		}
		// The shown stages come second: what the raw stage replaced
		// it sees as text, and it is left only the matches that an
		// escape sequence splits, and those it can see only after the
		// raw ones are gone (a secret whose first byte a stray "\x1b["
		// would take as the end of a sequence).
		//
		// Two shown stages: one hides string sequences' payloads, as
		// PlainText does, so a secret split by a whole OSC is found; the
		// other shows them, as a reader that renders from an offset
		// inside a payload does.
		text := &redactStage{set: sets[i], emit: next, count: rd.count, shown: true, plain: &r.plain}
		shown := &redactStage{set: sets[i], emit: text.write, count: rd.count, shown: true, payloads: true, plain: &r.plain}
		raw := &redactStage{set: sets[i], emit: shown.write, count: rd.count}
		r.stages = append([]*redactStage{raw, shown, text}, r.stages...)
		next = raw.write
	}
	return r
}

// write passes p through the stages; p is not retained.
func (r *redactor) write(p []byte) {
	if len(r.stages) == 0 {
		r.emit(p)
		return
	}
	for k, lp := range r.lives {
		if l := lp.Load(); l != nil && *l != r.liveSets[k] {
			r.useLiveSets(k, *l)
		}
	}
	r.plain = hiddenIndex(p) == len(p)
	for _, st := range r.stages {
		r.plain = r.plain && hiddenIndex(st.carry) == len(st.carry)
	}
	r.stages[0].write(p)
}

// useLiveSets makes the live stages apply l from this write on. A base
// holds every entry of the one it replaces; every entry of the old recent
// set is in the new base or the new recent set (startedSecrets.merge).
//
// What a stage holds back is judged again against its new set with this
// write: the raw stage scans its carry before every write anyway; a
// shown stage passes its carry unscanned when nothing is hidden (the raw
// stage before it has matched it), but that raw stage matched it against
// the old set, so the shown stages scan it once (rejudge). A recent stage
// whose new set lacks an entry (it is in the base now) releases the start
// of it that it holds into the base's stages, which come after it, are
// already on the new base, and hold it in turn. A recent stage whose new
// set is nil holds nothing more: it releases its carry at once. The
// recent stages are never emptied on a change of the base alone: the
// start of a secret registered while the base was built, which only the
// recent set has, would pass the base unmatched.
//
// Bytes already emitted are not judged again: a set is stored before
// the process holding its new secrets exists, so none of them can carry
// one (registerSecrets).
//
// An owner's set that let entries go (letGoLocked) stores a base of
// fewer entries and no recent set: the recent stages release what they
// hold into the base's, which hold every entry left, and what the base's
// stages hold of an entry let go they release as they rejudge it.
func (r *redactor) useLiveSets(k int, l liveSets) {
	at := len(r.stages) - 6*(len(r.lives)-k)
	live := r.stages[at : at+6]
	recent, base := live[:3], live[3:]
	if l.base != r.liveSets[k].base {
		for _, st := range base {
			st.set, st.rejudge = l.base, st.shown
		}
		if l.recent == nil {
			for _, st := range recent {
				st.flush()
			}
		}
	}
	if l.recent != r.liveSets[k].recent {
		for _, st := range recent {
			if st.set == nil {
				// Its phase is as old as its last set (pass).
				st.esc = escGround
			}
			st.set, st.rejudge = l.recent, st.shown
		}
	}
	r.liveSets[k] = l
}

// Write is write as an io.Writer; it never fails.
func (r *redactor) Write(p []byte) (int, error) {
	r.write(p)
	return len(p), nil
}

// flush releases what the stages hold back: the output has ended.
func (r *redactor) flush() {
	for _, st := range r.stages {
		st.flush()
	}
}

// redactStage applies one set to a stream, as it is or (shown) as a
// terminal shows it.
type redactStage struct {
	set   *redactSet
	emit  func([]byte)
	count *atomic.Int64
	carry []byte // held back: a tail that could begin a pattern
	edge  []byte // scratch: carry plus the start of the next write
	// tail is the last tailN bytes emitted, at most wrapGap: what comes
	// before the carry, which says whether a line break there ends a
	// line of a dump (encodedBefore). A scan reads a copy, prevBuf.
	tail    [wrapGap]byte
	tailN   int
	prevBuf [wrapGap]byte

	// A shown stage matches text, the bytes of carry+p outside escape
	// sequences; runs says where each run of text is in them. While a
	// scan runs on text, orig is carry+p and opos how much of it is
	// emitted.
	shown    bool
	payloads bool     // string sequences' payloads are hidden (stripEscapes)
	plain    *bool    // redactor.plain
	esc      escPhase // the parser's phase where carry (or the next write) begins
	text     []byte
	runs     []textRun
	orig     []byte
	opos     int
	rejudge  bool    // the set changed: scan the carry (redactor.useLiveSets)
	over     []int32 // scratch for overlapping
}

// write scans p after what is held back.
func (st *redactStage) write(p []byte) {
	if len(p) == 0 {
		return
	}
	if st.set == nil {
		st.pass(p)
		return
	}
	if st.shown {
		st.writeShown(p)
		return
	}
	if len(st.carry) > 0 {
		// A match starting in the carry ends within window bytes of p,
		// and a secret that starts inside it within window more
		// (overlapping), so those decide it; the rest of p is scanned
		// in place.
		k := min(len(p), 2*st.set.window)
		st.edge = append(append(st.edge[:0], st.carry...), p[:k]...)
		nc := len(st.carry)
		st.carry = st.carry[:0]
		if k == len(p) {
			done := st.scan(st.edge, len(st.edge), true, false)
			st.carry = append(st.carry, st.edge[done:]...)
			return
		}
		done := st.scan(st.edge, nc, false, false)
		if done < nc {
			// A run of overlapping secrets starting in the carry
			// goes on past the edge: scan it with the whole write.
			p = append(slices.Clone(st.edge[done:nc]), p...)
		} else {
			p = p[done-nc:]
		}
	}
	done := st.scan(p, len(p), true, false)
	st.carry = append(st.carry, p[done:]...)
}

// pass is write for a live stage without a set yet (it holds nothing
// back). A shown stage does not follow the escape sequences meanwhile:
// parsing every write twice more cost a stream of coloured output half
// its throughput while the Manager had no request's secret. Once it has
// a set, it parses from the ground state: the rest of a sequence open
// at that moment is read as text until it ends (a string's terminator
// and a new ESC bring the parser back), which can make it redact more,
// and miss only a secret that began inside that sequence, before any
// tree could read it.
func (st *redactStage) pass(p []byte) {
	st.send(p)
}

// writeShown is write for a shown stage.
func (st *redactStage) writeShown(p []byte) {
	if st.esc == escGround && *st.plain && !st.rejudge {
		// Nothing hidden: what is shown is what is written, and
		// the raw stage before this one has replaced every match in
		// it. Only a tail that an escape sequence in the next write
		// could make a match is held back.
		data := p
		if len(st.carry) > 0 {
			if len(p) > st.set.window {
				st.send(st.carry)
				st.carry = st.carry[:0]
			} else {
				st.edge = append(append(st.edge[:0], st.carry...), p...)
				st.carry = st.carry[:0]
				data = st.edge
			}
		}
		h := st.set.pendingFrom(data, 0, st.snapshot())
		st.out(data[:h])
		st.carry = append(st.carry, data[h:]...)
		return
	}
	st.rejudge = false
	st.edge = append(append(st.edge[:0], st.carry...), p...)
	st.carry = st.carry[:0]
	end := st.scanShown(st.edge, false)
	st.carry = append(st.carry, st.edge[st.opos:]...)
	// Held back from a byte that is shown, which the parser reads in its
	// ground state; or nothing, and the next write goes on from end.
	st.esc = escGround
	if len(st.carry) == 0 {
		st.esc = end
	}
	if len(st.carry) > st.set.window+maxHeldEscapes {
		st.dropHeldEscapes()
	}
}

// redactRunHeld bounds, in windows, a run of overlapping secrets that a
// stage holds back while a secret inside it may go on past what was
// written (overlapping): longer runs are cut, and a secret crossing the
// cut can show at most its part past the cut. Only a chain of secrets
// each starting inside the one before reaches it, or a secret with a
// period (where what follows the cut matches again).
const redactRunHeld = 4

// maxHeldEscapes bounds the escape sequences a shown stage holds back
// between the bytes of what could begin a secret.
const maxHeldEscapes = 4 << 10

// dropHeldEscapes removes the whole escape sequences from the carry: a
// command that follows the start of a secret with endless sequences and
// no text (a cursor dance) would otherwise grow it without bound. The
// sequences are lost from the output; releasing the start of the secret
// instead could leak it.
func (st *redactStage) dropHeldEscapes() {
	text, _, end := stripEscapes(st.carry, escGround, st.payloads, nil, nil)
	// The unfinished sequence at the end, which the next write goes on,
	// is kept as the fewest bytes that leave the parser where it is.
	st.carry = append(append(st.carry[:0], text...), escResume(end)...)
}

// scanShown scans what a terminal shows of data (held back or not, as
// scan), emitting data itself with each match's whole span replaced,
// escape sequences inside it included; st.opos is how much of data was
// emitted. It returns the parser's phase after data.
func (st *redactStage) scanShown(data []byte, final bool) escPhase {
	var end escPhase
	st.text, st.runs, end = stripEscapes(data, st.esc, st.payloads, st.text[:0], st.runs[:0])
	st.orig, st.opos = data, 0
	if end == escC1 && !final {
		// A 0xC2 at the end is a character or the start of a C1
		// control, which the next write says: it stays held, and the
		// parser reads it again from the ground state.
		st.orig = data[:len(data)-1]
	}
	st.scan(st.text, len(st.text), true, final)
	st.orig = nil
	return end
}

// flush releases the carry, redacting what matches in it.
func (st *redactStage) flush() {
	if len(st.carry) == 0 {
		return
	}
	data := append(st.edge[:0], st.carry...)
	st.carry = st.carry[:0]
	if st.shown {
		// The parser's phase is kept for a stream that goes on after a
		// merge of the live sets (useLiveSets).
		if st.esc = st.scanShown(data, true); st.esc == escC1 {
			st.esc = escGround
		}
		return
	}
	st.scan(data, len(data), true, true)
}

// scan emits data, redacting matches that start before stopAt, and
// returns how much of it was emitted. atEnd says data ends where the
// stream so far ends; then, unless final, a tail that could still begin a
// pattern is held back (not emitted). Without atEnd, every match starting
// before stopAt lies wholly in data, and scan returns at least stopAt,
// unless a run of overlapping secrets (overlapping) starting before
// stopAt may go on past data's end: it returns that run's start.
// While scanShown runs, data is the text shown, and what is emitted is
// the bytes it maps to (release, replace).
func (st *redactStage) scan(data []byte, stopAt int, atEnd, final bool) int {
	s := st.set
	prev := st.snapshot() // what comes before data
	pos := 0              // emitted up to here
	i := 0                // next sampled position
	// The last position sampled: a gram must fit, and a match starting
	// before stopAt is sampled within reach of its start.
	last := min(len(data)-redactGram, stopAt+s.reach-1)
	near, bits, shift, step := s.near, s.bits, s.shift, s.step
	for i <= last {
		// The filter, in locals: most of the time is spent here.
		for ; i <= last; i += step {
			g := binary.LittleEndian.Uint32(data[i:])
			n := (g * redactNearMul) >> (32 - redactNearLog)
			if near[n>>6]&(1<<(n&63)) == 0 {
				continue
			}
			if h := (g * redactFarMul) >> shift; bits[h>>6]&(1<<(h&63)) != 0 {
				break
			}
		}
		if i > last {
			break
		}
		g := binary.LittleEndian.Uint32(data[i:])
		best, bestStart, bestEnd := -1, 0, 0
		group := s.grams[g]
		for _, ref := range s.refs[group>>32 : group>>32+group&(1<<32-1)] {
			pat := s.pats[ref.pat]
			start := i - int(ref.off)
			end := start + len(pat)
			ok := start >= 0 && end <= len(data) && bytes.Equal(data[start:end], pat)
			if !ok && s.wrap[ref.pat] {
				start, end, ok = matchWrapped(data, pat, i, int(ref.off), prev)
			}
			if !ok || start < pos || start >= stopAt {
				continue
			}
			if best >= 0 && (start > bestStart || start == bestStart && len(pat) <= len(s.pats[best])) {
				continue
			}
			best, bestStart, bestEnd = int(ref.pat), start, end
		}
		if best < 0 {
			i += s.step
			continue
		}
		if atEnd && !final && len(data)-bestStart <= s.window {
			// A longer pattern starting here or earlier may still
			// complete with the next write.
			if h := s.pendingFrom(data, pos, prev); h <= bestStart {
				return st.release(data, pos, h)
			}
		}
		over, overEnd, open := s.overlapping(data, bestStart, bestEnd, int32(best), st.over[:0])
		st.over = over
		if open && !final && len(data)-bestStart <= redactRunHeld*s.window {
			// A secret that starts inside this match may go on past
			// the end of data: the next write decides, or, without
			// atEnd, the rest of the write (a run of overlapping
			// secrets longer than write's edge: tenth attack review,
			// TestAttackRedactChainPastEdge). A longer run is cut
			// here, not held: a secret with a period makes a run as
			// long as the tree writes it, and holding it grew the
			// carry, and the time to scan it again, with each write.
			return st.release(data, pos, bestStart)
		}
		st.release(data, pos, bestStart)
		st.count.Add(1)
		st.send(s.repl[best])
		for _, o := range over {
			st.count.Add(1)
			st.send(s.repl[o])
		}
		st.skip(overEnd)
		pos, i = overEnd, overEnd
	}
	switch {
	case !atEnd:
		return st.release(data, pos, max(pos, stopAt))
	case final:
		return st.release(data, pos, len(data))
	}
	return st.release(data, pos, s.pendingFrom(data, pos, prev))
}

// overlapping extends the match data[start:end] over the secrets that
// start inside it and go on past its end ("…SHARED99" matched, then
// "SHARED99tail…" would show its tail: the ninth attack review, root),
// each in turn, and returns them (appended to over), where the run of
// them ends, and whether one may still complete past the end of data.
// It walks the trie from each byte of the run that a secret starting
// there could reach past the run's end from (the last maxLen-1), so it
// costs a run's length times maxLen at most, paid only where a secret is
// found; a form with line breaks inside (base64 or hex wrapped) is not
// followed. A secret already named in the run (first, the matched one,
// included) is named again only where it starts after the last
// occurrence named ends, as adjacent matches are: a secret with a period
// ("00000000", "abababab") occurs at every period of a run of it, and
// one name per occurrence made the output twelve times the input
// (tenth attack review, TestAttackRedactPeriodicRun).
func (s *redactSet) overlapping(data []byte, start, end int, first int32, over []int32) ([]int32, int, bool) {
	open := false
	named := end // where the last occurrence named ends
	for j := start + 1; j < end; j++ {
		// A secret starting at or before end-maxLen ends by end.
		j = max(j, end-s.maxLen+1)
		node, k := int32(0), j
		pat, patEnd := int32(-1), end
		for ; k < len(data); k++ {
			next, ok := s.trie[uint64(node)<<8|uint64(data[k])]
			if !ok {
				break
			}
			node = next
			if d := s.depthOf[node]; d > 0 && k+1 > patEnd {
				pat, patEnd = d-1, k+1
			}
		}
		if k == len(data) && s.hasKids[node] {
			open = true
		}
		if pat >= 0 {
			if j >= named || pat != first && !slices.Contains(over, pat) {
				over = append(over, pat)
				named = patEnd
			}
			end = patEnd
		}
	}
	return over, end, open
}

// release emits data[pos:to] and returns to; in scanShown, the bytes of
// orig up to where data[to] is, escape sequences before it included.
func (st *redactStage) release(data []byte, pos, to int) int {
	if st.orig == nil {
		st.out(data[pos:to])
		return to
	}
	o := len(st.orig)
	if to < len(st.text) {
		o = st.origAt(to)
	}
	st.out(st.orig[st.opos:o])
	st.opos = o
	return to
}

// skip passes over a replaced match ending at data[end]: in scanShown,
// the bytes of orig up to just after its last shown byte.
func (st *redactStage) skip(end int) {
	if st.orig != nil {
		st.opos = st.origAt(end-1) + 1
	}
}

// textRun is a run of shown bytes: text[text:] begins at orig[orig:],
// up to the next run.
type textRun struct{ text, orig int }

// origAt returns where text[j] is in orig.
func (st *redactStage) origAt(j int) int {
	k, found := slices.BinarySearchFunc(st.runs, j, func(r textRun, j int) int { return cmp.Compare(r.text, j) })
	if !found {
		k--
	}
	return st.runs[k].orig + j - st.runs[k].text
}

// out emits p unless it is empty.
func (st *redactStage) out(p []byte) {
	if len(p) > 0 {
		st.send(p)
	}
}

// send emits p and keeps its end in tail.
func (st *redactStage) send(p []byte) {
	st.emit(p)
	if len(p) >= wrapGap {
		st.tailN = copy(st.tail[:], p[len(p)-wrapGap:])
		return
	}
	keep := min(st.tailN, wrapGap-len(p))
	copy(st.tail[:], st.tail[st.tailN-keep:st.tailN])
	st.tailN = keep + copy(st.tail[keep:], p)
}

// snapshot returns a copy of tail, which stays put while the scan that
// reads it emits.
func (st *redactStage) snapshot() []byte {
	st.prevBuf = st.tail
	return st.prevBuf[:st.tailN]
}

// escPhase is where a terminal's parser is (ECMA-48, as PlainText parses
// it): in text, in an escape or control sequence, in a string sequence's
// payload, or after a 0xC2 byte that may begin a C1 control.
type escPhase uint8

const (
	escGround    escPhase = iota
	escEscape             // after ESC
	escEscInter           // after ESC and intermediates
	escCSI                // a control sequence's parameters
	escCSIInter           // a control sequence's intermediates
	escString             // a DCS, SOS, PM or APC payload (payloads hidden only)
	escOSC                // an OSC payload, which a newline also ends
	escStringEsc          // ESC in a string's payload: ST, or a new sequence
	escOSCEsc             //
	escStringC2           // 0xC2 in a string's payload: C1 ST, or payload
	escOSCC2              //
	escC1                 // 0xC2 in text as the last byte: a C1 control or a character
)

// escResume returns bytes that bring the parser from escGround to phase:
// what a shown stage keeps of a sequence whose start it dropped.
func escResume(phase escPhase) []byte {
	return []byte([...]string{
		escGround: "", escEscape: "\x1b", escEscInter: "\x1b ", escCSI: "\x1b[", escCSIInter: "\x1b[ ",
		escString: "\x1bP", escOSC: "\x1b]", escStringEsc: "\x1bP\x1b", escOSCEsc: "\x1b]\x1b",
		escStringC2: "\x1bP\xc2", escOSCC2: "\x1b]\xc2", escC1: "\xc2",
	}[phase])
}

// hiddenByte marks the bytes that begin what a terminal does not show as
// text in the ground state: ESC, the C0 controls PlainText removes (all
// but "\t", "\n", and "\r" and "\b", which move the cursor), DEL, and 0xC2,
// the first byte of a C1 control's UTF-8 form (U+0080-U+009F).
var hiddenByte = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = c != '\t' && c != '\n' && c != '\r' && c != '\b'
	}
	t[0x7f], t[0xc2] = true, true
	return t
}()

// hiddenIndex returns the index of the first byte of b that hiddenByte
// marks, or len(b). Thirty-two bytes at a time: a block without a byte
// below 0x20 or above 0x7E costs a few operations a word; in one with
// such a byte (a newline, mostly) only the bytes so marked are looked up.
func hiddenIndex(b []byte) int {
	i := 0
	for ; i+32 <= len(b); i += 32 {
		w := b[i : i+32 : i+32]
		m0, m1 := controlMarks(binary.LittleEndian.Uint64(w)), controlMarks(binary.LittleEndian.Uint64(w[8:]))
		m2, m3 := controlMarks(binary.LittleEndian.Uint64(w[16:])), controlMarks(binary.LittleEndian.Uint64(w[24:]))
		if m0|m1|m2|m3 == 0 {
			continue
		}
		for k, m := range [4]uint64{m0, m1, m2, m3} {
			for ; m != 0; m &= m - 1 {
				if j := i + 8*k + bits.TrailingZeros64(m)/8; hiddenByte[b[j]] {
					return j
				}
			}
		}
	}
	for ; i < len(b); i++ {
		if hiddenByte[b[i]] {
			return i
		}
	}
	return len(b)
}

// controlMarks returns the high bit of each byte of x below 0x20 or above
// 0x7E; a borrow or a carry may also mark the byte next to a marked one,
// never one of a word with none.
func controlMarks(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return ((x-0x20*ones)&^x | (x + ones) | x) & highs
}

// stripEscapes appends to text the bytes of data a terminal shows and to
// runs where each run of them is in data, parsing from state; it returns
// the state after data. It follows PlainText's parser (internal/termtext)
// in what it hides: "ESC [" (or C1 0x9B), parameters 0x30-0x3F,
// intermediates 0x20-0x2F and a final byte 0x40-0x7E make a control
// sequence (colours, cursor moves); ESC, intermediates and a final byte
// 0x30-0x7E an escape sequence; the C0 controls but "\t", "\n", "\r" and
// "\b", DEL and the C1 controls (U+0080-U+009F) are hidden. A byte that
// does not fit the sequence ends it and is parsed again: a malformed
// sequence swallows no text.
//
// With payloads, a string sequence (OSC "ESC ]", DCS "ESC P", SOS, PM,
// APC, or their C1 forms) runs to BEL, ST ("ESC \" or C1 0x9C) or, for an
// OSC, a newline, and its payload is hidden, as PlainText hides it.
// Without, its introducer is an escape sequence and its payload is text:
// a reader that renders output from an offset inside a payload sees it
// as text.
func stripEscapes(data []byte, phase escPhase, payloads bool, text []byte, runs []textRun) ([]byte, []textRun, escPhase) {
	for i := 0; i < len(data); {
		c := data[i]
		switch phase {
		case escGround:
			// Text runs to the next byte that may be hidden.
			j := i + hiddenIndex(data[i:])
			if j < len(data) && data[j] == 0xc2 && j+1 < len(data) && (data[j+1] < 0x80 || data[j+1] > 0x9f) {
				j++ // the start of a character, not of a C1 control
			}
			if j > i {
				if n := len(runs); n > 0 && runs[n-1].orig+len(text)-runs[n-1].text == i {
					text = append(text, data[i:j]...) // goes on the last run
				} else {
					runs = append(runs, textRun{len(text), i})
					text = append(text, data[i:j]...)
				}
				i = j
				continue
			}
			switch {
			case c == 0x1b:
				phase = escEscape
			case c == 0xc2 && i+1 == len(data):
				phase = escC1
			case c == 0xc2:
				i++
				phase = c1Phase(data[i], payloads)
			}
			// Any other hidden byte shows nothing.
		case escC1:
			// 0xC2 ended the last data: it was not text either way.
			phase = escGround
			if c >= 0x80 && c <= 0x9f {
				phase = c1Phase(c, payloads)
			} else {
				continue
			}
		case escEscape:
			switch {
			case c == 0x1b:
			case c == '[':
				phase = escCSI
			case payloads && c == ']':
				phase = escOSC
			case payloads && (c == 'P' || c == 'X' || c == '^' || c == '_'):
				phase = escString
			default:
				var again bool
				if phase, again = seqByte(c, escEscInter, 0x30); again {
					continue
				}
			}
		case escEscInter:
			var again bool
			if phase, again = seqByte(c, escEscInter, 0x30); again {
				continue
			}
		case escCSI, escCSIInter:
			if phase == escCSI && c >= 0x30 && c <= 0x3f {
				break // a parameter
			}
			var again bool
			if phase, again = seqByte(c, escCSIInter, 0x40); again {
				continue
			}
		case escString, escOSC:
			switch {
			case c == 0x07:
				phase = escGround
			case c == 0x1b:
				phase += escStringEsc - escString
			case c == 0xc2:
				phase += escStringC2 - escString
			case c == '\n' && phase == escOSC:
				phase = escGround
				continue
			}
		case escStringEsc, escOSCEsc:
			if c == '\\' {
				phase = escGround
			} else {
				// ESC aborts the string and begins a new sequence.
				phase = escEscape
				continue
			}
		case escStringC2, escOSCC2:
			if c == 0x9c {
				phase = escGround
			} else {
				phase -= escStringC2 - escString
				continue
			}
		}
		i++
	}
	return text, runs, phase
}

// seqByte is the phase after c, a byte of an escape or control sequence
// past its introducer (and a control sequence's parameters): an
// intermediate (0x20-0x2F) leads to inter, a final byte (final to 0x7E)
// ends the sequence. again is true when c fits neither: it ends the
// sequence and is parsed again.
func seqByte(c byte, inter escPhase, final byte) (next escPhase, again bool) {
	switch {
	case c >= 0x20 && c <= 0x2f:
		return inter, false
	case c >= final && c <= 0x7e:
		return escGround, false
	}
	return escGround, true
}

// c1Phase is the phase after the C1 control U+0080+(c-0x80).
func c1Phase(c byte, payloads bool) escPhase {
	switch {
	case c == 0x9b:
		return escCSI
	case payloads && c == 0x9d:
		return escOSC
	case payloads && (c == 0x90 || c == 0x98 || c == 0x9e || c == 0x9f):
		return escString
	}
	return escGround
}
