package agentproc_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// Environment of the "pieces", "stream" and "ticks" helper modes.
const (
	helperBytesEnv  = "AGENTPROC_TEST_BYTES"  // how much "stream" writes
	helperPiecesEnv = "AGENTPROC_TEST_PIECES" // hex pieces, comma-separated
	helperFIFOEnv   = "AGENTPROC_TEST_FIFO"   // opened for reading after the first piece
)

// helperPieces writes each piece with its own write, so the parent sees
// exactly those split points, and waits for one byte on the FIFO before
// every piece but the first. The FIFO is opened only after the first piece
// is written, so a test whose open for writing returns knows that it was.
func helperPieces() int {
	var pieces [][]byte
	for _, h := range strings.Split(os.Getenv(helperPiecesEnv), ",") {
		b, err := hex.DecodeString(h)
		if err != nil {
			return 2
		}
		pieces = append(pieces, b)
	}
	var fifo *os.File
	for i, piece := range pieces {
		if i > 0 {
			if fifo == nil {
				f, err := os.Open(os.Getenv(helperFIFOEnv))
				if err != nil {
					return 3
				}
				defer f.Close()
				fifo = f
			}
			// EOF (the test closed its end) also lets the helper go on.
			_, _ = fifo.Read(make([]byte, 1))
		}
		if _, err := os.Stdout.Write(piece); err != nil {
			return 4
		}
	}
	return 0
}

func helperStream() int {
	n, err := strconv.ParseInt(os.Getenv(helperBytesEnv), 10, 64)
	if err != nil {
		return 2
	}
	line := []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n")
	block := bytes.Repeat(line, (64<<10)/len(line))
	for n > 0 {
		k := min(n, int64(len(block)))
		if _, err := os.Stdout.Write(block[:k]); err != nil {
			return 3
		}
		n -= k
	}
	return 0
}

func helperTicks() int {
	fifo, err := os.Open(os.Getenv(helperFIFOEnv))
	if err != nil {
		return 2
	}
	defer fifo.Close()
	b := make([]byte, 1)
	for {
		if _, err := fifo.Read(b); err != nil {
			return 0
		}
		line := strconv.AppendInt(nil, time.Now().UnixNano(), 10)
		if _, err := os.Stdout.Write(append(line, '\n')); err != nil {
			return 3
		}
	}
}

func TestReadNegativeOffset(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "echo hi"})
	mustWait(t, p)
	if _, err := p.Read(-1); !errors.Is(err, agentproc.ErrInvalidRequest) {
		t.Errorf("Read(-1): got %v, want ErrInvalidRequest", err)
	}
	if _, err := p.WaitOutput(testContext(t), -1); !errors.Is(err, agentproc.ErrInvalidRequest) {
		t.Errorf("WaitOutput(-1): got %v, want ErrInvalidRequest", err)
	}
	if _, err := p.WaitMatch(testContext(t), nil); !errors.Is(err, agentproc.ErrInvalidRequest) {
		t.Errorf("WaitMatch(nil): got %v, want ErrInvalidRequest", err)
	}
}

func TestWaitMatchFindsEarlierLine(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "echo first&& echo listening on 8080&& echo last"})
	mustWait(t, p)
	line, err := p.WaitMatch(testContext(t), regexp.MustCompile(`^listening on \d+$`))
	if err != nil || line != "listening on 8080" {
		t.Errorf("WaitMatch: got (%q, %v), want (%q, nil)", line, err, "listening on 8080")
	}
	_, err = p.WaitMatch(testContext(t), regexp.MustCompile(`never`))
	if !errors.Is(err, agentproc.ErrExited) {
		t.Errorf("WaitMatch without a match: got %v, want ErrExited", err)
	}
}
