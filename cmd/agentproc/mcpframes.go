package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP SDK's stdio transport ends the session on the first line it cannot
// decode, and the session's end stops every process the agent started. The
// frame filter here stands between stdin and the transport: a line that is
// not a JSON-RPC message, or is longer than the transport takes, is answered
// with a JSON-RPC error (id null, as the specification asks when the id
// cannot be read) and dropped, and the session carries on.

// maxFrameBytes is the longest line passed on: the SDK's own limit, so that
// the transport never sees a line it would end the session for.
const maxFrameBytes = mcp.DefaultMaxLineLength

// JSON-RPC's error codes for input that is not a request.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
)

// syncWriter serialises the transport's writes and the filter's error
// replies, each one whole line.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Close leaves stdout open: the transport closes its writer when the
// session ends, while a log line may still be on its way out.
func (s *syncWriter) Close() error { return nil }

// frameFilter is an io.ReadCloser of the lines of r that decode as JSON-RPC
// messages (or batches), each with its newline; it answers every other
// line on out.
type frameFilter struct {
	r       *bufio.Reader
	out     io.Writer
	pending []byte // the rest of the line being passed on
}

func newFrameFilter(r io.Reader, out io.Writer) *frameFilter {
	return &frameFilter{r: bufio.NewReaderSize(r, 64<<10), out: out}
}

func (f *frameFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		line, err := f.nextLine()
		if line != nil {
			if reply := check(line); reply != "" {
				if _, werr := io.WriteString(f.out, reply); werr != nil {
					return 0, werr
				}
			} else {
				f.pending = append(line, '\n')
			}
		}
		if err != nil && len(f.pending) == 0 {
			return 0, err
		}
		if err != nil {
			break
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

func (f *frameFilter) Close() error { return nil }

// nextLine returns the next non-blank line without its line ending; a line
// over maxFrameBytes is read to its end and returned as a marker line that
// check answers. The error is the reader's, io.EOF at the end.
func (f *frameFilter) nextLine() ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := f.r.ReadSlice('\n')
		if !tooLong {
			line = append(line, chunk...)
			if len(line) > maxFrameBytes+2 {
				tooLong, line = true, nil
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return []byte(tooLongMarker), err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				return nil, err
			}
			line = line[:0]
			continue
		}
		return line, err
	}
}

// tooLongMarker stands for a line over maxFrameBytes; it is not JSON, so
// it never passes.
const tooLongMarker = "\x00too long"

// check returns "" for a line the transport can take, else the error reply
// for it.
func check(line []byte) string {
	switch {
	case string(line) == tooLongMarker:
		return rpcError(rpcParseError, fmt.Sprintf("Parse error: a message is one line of at most %d bytes; this line was dropped", maxFrameBytes))
	case !json.Valid(line):
		return rpcError(rpcParseError, "Parse error: the line is not one JSON value; it was dropped")
	}
	if line = bytes.TrimSpace(line); line[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(line, &batch) != nil || len(batch) == 0 {
			return rpcError(rpcInvalidRequest, "Invalid Request: an empty or malformed batch was dropped")
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return rpcError(rpcInvalidRequest, "Invalid Request: "+err.Error())
			}
		}
		return ""
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		return rpcError(rpcInvalidRequest, "Invalid Request: "+err.Error())
	}
	return ""
}

// rpcError is a JSON-RPC error response with a null id, and its newline.
func rpcError(code int, message string) string {
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": code, "message": message},
	})
	return string(b) + "\n"
}
