package agentproc

import (
	"context"
	"fmt"
	"sync"
	"time"

	"cdr.dev/slog/v3"
)

// WithStdinStall shortens the stdin write bound so tests of a child that
// never reads stay fast.
func WithStdinStall(d time.Duration) Option {
	return optionFunc(func(c *config) { c.stdinStall = d })
}

// WithLogDirBound shortens the bound on output log directory calls so tests
// of a hung directory stay fast.
func WithLogDirBound(d time.Duration) Option {
	return optionFunc(func(c *config) { c.logDirBound = d })
}

// WaitLogRemovals waits (at most the log directory bound) until the output
// logs queued for removal are gone.
func WaitLogRemovals(m *Manager) { m.logs.waitRemoved() }

// WithPipeDrain sets how long the exit path waits for the output pipe after
// the shell exited. Tests lengthen it so that a stop that waits it out,
// instead of sweeping what holds the pipe, misses the test deadline.
func WithPipeDrain(d time.Duration) Option {
	return optionFunc(func(c *config) { c.pipeDrain = d })
}

// WarnSink is a log sink that keeps what is logged at warning level or
// above, for tests inside and outside the package that count or read the
// warnings.
type WarnSink struct {
	mu    sync.Mutex
	msg   []string
	lines []string // the message and the fields, " name=value" each
}

func (w *WarnSink) LogEntry(_ context.Context, e slog.SinkEntry) {
	if e.Level < slog.LevelWarn {
		return
	}
	line := e.Message
	for _, f := range e.Fields {
		line += fmt.Sprintf(" %s=%v", f.Name, f.Value)
	}
	w.mu.Lock()
	w.msg = append(w.msg, e.Message)
	w.lines = append(w.lines, line)
	w.mu.Unlock()
}

func (*WarnSink) Sync() {}

// Messages returns the messages kept so far.
func (w *WarnSink) Messages() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msg...)
}

// Lines returns the warnings kept so far, each its message followed by its
// fields.
func (w *WarnSink) Lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

// SetKerberosCacheDir moves where kerberosCaches looks for the default
// and sssd's ticket caches (/tmp) to dir until the test ends, so that a
// test's caches are not seen by other tests' policies.
func SetKerberosCacheDir(t interface{ Cleanup(func()) }, dir string) {
	old := krb5CacheDir
	krb5CacheDir = dir
	t.Cleanup(func() { krb5CacheDir = old })
}
