package agentproc

import (
	"context"
	"errors"
	"regexp"
	"testing"
)

// TestLineMatcherStopsBetweenLines: a match no ctx can interrupt is
// bounded per line (maxMatchWork), so WaitMatch checks ctx between the
// lines of a chunk: a chunk of many lines, each costly, otherwise held a
// ready check's goroutine, and Stop and Close with it, past their end
// (fourteenth attack review, TestAttackReadyMatchCostsHostCPU). The
// control: with a live ctx the same chunk's second line is found.
func TestLineMatcherStopsBetweenLines(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^b$`)
	live := newLineMatcher(re, false)
	if line, ok, err := live.feed(context.Background(), Chunk{Data: "a\nb\n"}); err != nil || !ok || line != "b" {
		t.Fatalf("control: got %q, %v, %v, want \"b\" matched", line, ok, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lm := newLineMatcher(re, false)
	if line, ok, err := lm.feed(ctx, Chunk{Data: "a\nb\n"}); !errors.Is(err, context.Canceled) || ok {
		t.Fatalf("an ended ctx: got %q, %v, %v, want context.Canceled before any line is matched", line, ok, err)
	}
}
