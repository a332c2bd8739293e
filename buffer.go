package agentproc

import (
	"context"
	"sync"
)

// TEMPORARY naive buffer; replaced by the real one.
type Chunk struct {
	Data    string `json:"data"`
	Offset  int64  `json:"offset"`
	Next    int64  `json:"next"`
	Omitted int64  `json:"omitted"`
	EOF     bool   `json:"eof"`
}
type Truncation struct {
	OriginalBytes  int64  `json:"original_bytes"`
	RetainedBytes  int64  `json:"retained_bytes"`
	OmittedBytes   int64  `json:"omitted_bytes"`
	TruncatedLines int    `json:"truncated_lines"`
	Strategy       string `json:"strategy"`
}
type outputBuffer struct {
	mu     sync.Mutex
	data   []byte
	closed bool
	ch     chan struct{}
}

func newOutputBuffer(headBytes, tailBytes int) *outputBuffer { return &outputBuffer{} }
func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.data = append(b.data, p...)
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	b.mu.Unlock()
	return len(p), nil
}
func (b *outputBuffer) closeWrite() {
	b.mu.Lock()
	b.closed = true
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	b.mu.Unlock()
}
func (b *outputBuffer) total() int64 { b.mu.Lock(); defer b.mu.Unlock(); return int64(len(b.data)) }
func (b *outputBuffer) text(int) (string, *Truncation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.data), nil
}
func (b *outputBuffer) read(offset int64) Chunk {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Chunk{Data: string(b.data[offset:]), Offset: offset, Next: int64(len(b.data)), EOF: b.closed}
}
func (b *outputBuffer) waitRead(ctx context.Context, offset int64) (Chunk, error) {
	return b.read(offset), nil
}
func (b *outputBuffer) changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}
