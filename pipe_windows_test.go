package agentproc

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestOutputPipeDeadline checks that the output pipe's read end takes a
// deadline and that Close cancels a pending read, with the write end held
// by a process outside any job of ours: the two ways the drain is bounded.
func TestOutputPipeDeadline(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := outputPipe()
	if err != nil {
		t.Fatalf("outputPipe: %v", err)
	}
	defer r.Close()
	rep := NewPIDReporter(t)
	holder := exec.Command(exe)
	holder.Env = append(os.Environ(), helperModeEnv+"=sleep", rep.Env())
	holder.Stdout = w
	if err := holder.Start(); err != nil {
		t.Fatalf("start holder: %v", err)
	}
	_ = w.Close()
	t.Cleanup(func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	})
	// The holder is running (it reported) and keeps the write end open.
	rep.Next(time.Now().Add(20 * time.Second))

	if err := r.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatalf("SetReadDeadline: got %v, want nil (an overlapped handle)", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 64))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Read: got %v, want os.ErrDeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Read still blocked 10s after its 100ms deadline")
	}

	// Close must end a read that has no deadline.
	_ = r.SetReadDeadline(time.Time{})
	go func() {
		_, err := r.Read(make([]byte, 64))
		done <- err
	}()
	// The read is issued before Close or after it; either way it must
	// return, so no wait for it to start is needed.
	_ = r.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("Read after Close: got nil, want an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Read still blocked 10s after Close")
	}
}
