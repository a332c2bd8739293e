package egress

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// connPair returns two connected ends: over the loopback (the path a
// tunnel takes on Linux) or a net.Pipe (a caller's Dial: io.Copy).
func connPair(t *testing.T, kind string) (net.Conn, net.Conn) {
	t.Helper()
	if kind == "pipe" {
		a, b := net.Pipe()
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		return a, b
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var b net.Conn
	select {
	case b = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("accept: got nothing in 10 s, want a connection")
	}
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

func endWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// waitDone fails t unless done is closed within 10 s.
func waitDone(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still running after 10 s, want it returned", what)
	}
}

// TestCopyConnCopiesEveryByte: copyConn passes every byte in order, across
// many reads of its chunk size and a last short one, and returns at the
// end of its source.
func TestCopyConnCopiesEveryByte(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"tcp", "pipe"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			srcPeer, src := connPair(t, kind)
			dst, dstPeer := connPair(t, kind)
			payload := make([]byte, 3<<20+1)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range payload {
				payload[i] = byte(r.Uint32())
			}
			go func() {
				_, _ = srcPeer.Write(payload)
				endWrite(srcPeer)
			}()
			done := make(chan struct{})
			go func() { defer close(done); copyConn(dst, src, nil); endWrite(dst) }()
			got := make(chan []byte, 1)
			go func() { b, _ := io.ReadAll(dstPeer); got <- b }()
			var b []byte
			select {
			case b = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("read: got no end in 10 s, want the payload and EOF")
			}
			if !bytes.Equal(b, payload) {
				t.Errorf("got %d bytes (equal %v), want the %d sent", len(b), bytes.Equal(b, payload), len(payload))
			}
			waitDone(t, done, "copyConn after its source ended")
		})
	}
}

// TestCopyConnEndsWhenClosed: a copy waiting on an idle source returns
// when the source is closed (Listener.Close), and a copy whose
// destination's peer is gone returns at its failed write.
func TestCopyConnEndsWhenClosed(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"tcp", "pipe"} {
		t.Run(kind+"/idle source closed", func(t *testing.T) {
			t.Parallel()
			_, src := connPair(t, kind)
			dst, _ := connPair(t, kind)
			done := make(chan struct{})
			go func() { defer close(done); copyConn(dst, src, nil) }()
			_ = src.Close()
			waitDone(t, done, "copyConn after its source was closed")
		})
		t.Run(kind+"/destination gone", func(t *testing.T) {
			t.Parallel()
			srcPeer, src := connPair(t, kind)
			dst, dstPeer := connPair(t, kind)
			_ = dstPeer.Close()
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				for { // until src is closed below
					if _, err := srcPeer.Write(make([]byte, 64<<10)); err != nil {
						return
					}
				}
			}()
			done := make(chan struct{})
			go func() { defer close(done); copyConn(dst, src, nil) }()
			waitDone(t, done, "copyConn after its destination was closed")
			_ = src.Close()
			waitDone(t, wrote, "the source's writer")
		})
	}
}
