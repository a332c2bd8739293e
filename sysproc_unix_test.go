//go:build unix

package agentproc_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/agentproc/agentproc"
)

// TestChildCannotTakeHostTerminal runs a host (the test binary as the
// "ttyhost" helper) under a pseudo-terminal, the way a coding agent runs in
// a user's terminal, and has it start a command that prompts on /dev/tty.
// The command runs in a session of its own, so opening /dev/tty fails at
// once: the prompt never reaches the host's terminal and the command ends
// with its own error instead of hanging, stopped by SIGTTIN.
func TestChildCannotTakeHostTerminal(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	host := exec.CommandContext(ctx, exe)
	host.Env = append(os.Environ(), agentproc.HelperEnv+"="+agentproc.UseHelper("ttyhost"))
	// pty.Start makes the terminal the host's controlling terminal.
	term, err := pty.Start(host)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer term.Close()
	var screen bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		// Ends with EIO once the host, the last holder of the terminal,
		// has exited.
		_, _ = io.Copy(&screen, term)
	}()
	waitErr := host.Wait()
	select {
	case <-copied:
	case <-ctx.Done():
		t.Fatal("terminal output did not end after the host exited")
	}
	got := screen.String()
	if waitErr != nil {
		t.Fatalf("host: got %v, want exit 0; terminal:\n%s", waitErr, got)
	}
	if strings.Contains(got, strings.TrimSpace(ttyPrompt)) {
		t.Errorf("terminal got the child's prompt, want it kept off the host's terminal:\n%s", got)
	}
	if !strings.Contains(got, "host: exit=") || strings.Contains(got, "host: exit=0 ") {
		t.Errorf("terminal got %q, want the host to report a failed command", got)
	}
	if !strings.Contains(got, "/dev/tty") {
		t.Errorf("terminal got %q, want the command's own error about /dev/tty in its output", got)
	}
}
