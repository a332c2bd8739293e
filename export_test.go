package agentproc

import "time"

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
