package agentproc

import "time"

// WithStdinStall shortens the stdin write bound so tests of a child that
// never reads stay fast.
func WithStdinStall(d time.Duration) Option {
	return optionFunc(func(c *config) { c.stdinStall = d })
}
