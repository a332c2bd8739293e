package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The serve command and its clients end to end, each a process of its own,
// as a person runs them.

// served is a running agentproc serve.
type served struct {
	cmd   *exec.Cmd
	addr  string // what it listens on, as it printed it
	token string // the token it generated, if any
}

// serveInDir starts agentproc serve on a socket in dir, dir being its work
// dir too, with args after, and returns it and the environment that points
// the client commands at it.
func serveInDir(t *testing.T, ctx context.Context, dir string, args ...string) (*served, []string) {
	t.Helper()
	sock := filepath.Join(dir, "agentproc.sock")
	s := startServe(t, ctx, append([]string{"--socket", sock, "--workdir", dir}, args...)...)
	return s, []string{socketEnv + "=" + sock}
}

// startServe starts agentproc serve with args and waits until it says where
// it listens. It is ended (endServe) at the end of the test if still
// running.
func startServe(t *testing.T, ctx context.Context, args ...string) *served {
	t.Helper()
	return startServeCmd(t, ctx, agentprocCmd(append([]string{"serve"}, args...)...))
}

// startServeCmd is startServe for a serve command made by the caller.
func startServeCmd(t *testing.T, ctx context.Context, cmd *exec.Cmd) *served {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		if cmd.ProcessState == nil {
			endServe(cmd)
			_ = cmd.Wait()
		}
	})
	s := &served{cmd: cmd}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-done:
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			t.Fatal("serve never said where it listens")
		case line, ok := <-lines:
			if !ok {
				t.Fatal("serve exited before it listened")
			}
			if v, ok := strings.CutPrefix(line, tokenEnv+"="); ok {
				s.token = v
			}
			if v, ok := strings.CutPrefix(line, "agentproc serve: listening on "); ok {
				s.addr, _, _ = strings.Cut(v, " ")
				// Keep draining stderr so serve never blocks on it.
				go func() {
					for range lines {
					}
				}()
				return s
			}
		}
	}
}

// clientCmd returns the test binary run as agentproc with args, a client
// of the serve that env (added to the test's environment) names, killed
// when ctx ends.
func clientCmd(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), env...)
	return cmd
}

// cli runs one agentproc client command with env added to the test's
// environment.
func cli(t *testing.T, ctx context.Context, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := clientCmd(ctx, env, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	code = exitStatus(t, args, cmd.Run())
	return out.String(), errb.String(), code
}

// exitStatus is the exit code of the agentproc command that ran args and
// returned err from Run or Wait; an error other than an exit fails the test.
func exitStatus(t *testing.T, args []string, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode()
	case err != nil:
		t.Fatalf("agentproc %q: %v", args, err)
	}
	return 0
}
