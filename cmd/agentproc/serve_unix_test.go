//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// endServe asks serve to stop, as SIGTERM does.
func endServe(cmd *exec.Cmd) { _ = cmd.Process.Signal(syscall.SIGTERM) }

// stop sends SIGTERM and waits for serve to exit, returning its exit code.
func (s *served) stop(t *testing.T) int {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := s.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func TestServeUnixSocket(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	s, _ := serveInDir(t, ctx, dir, "--grace", "2s")
	sock := filepath.Join(dir, "agentproc.sock")
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket: %v, %v; want a socket of mode 0600", fi.Mode(), err)
	}
	env := []string{socketEnv + "=" + sock}
	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, errOut, code := cli(t, ctx, env, args...)
		if code != wantCode {
			t.Fatalf("agentproc %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, out, errOut)
		}
		return out
	}

	if out := run(0, "run", "--", "echo", "hello"); out != "hello\n" {
		t.Errorf("run: got %q, want hello", out)
	}
	run(3, "run", "--", "exit 3")
	// Several arguments stay several, quoting and all.
	if out := run(0, "run", "--", "sh", "-c", `echo "$1"; echo "it's"`, "sh", "a  b"); out != "a  b\nit's\n" {
		t.Errorf("run with arguments: got %q, want them kept apart", out)
	}

	// logs -f of a process that prints for a while.
	printer := strings.TrimSpace(run(0, "run", "-d", "--", "for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done"))
	if out := run(0, "logs", "-f", printer[:8]); out != "line 1\nline 2\nline 3\nline 4\nline 5\n" {
		t.Errorf("logs -f: got %q, want the five lines", out)
	}
	if out := run(0, "logs", printer); !strings.HasSuffix(out, "line 5\n") {
		t.Errorf("logs: got %q", out)
	}

	pidFile := filepath.Join(dir, "sleeper.pid")
	sleeper := strings.TrimSpace(run(0, "run", "-d", "--", "echo $$ > "+pidFile+"; exec sleep 3600"))
	out := run(0, "ps")
	if !strings.HasPrefix(out, "ID ") || !strings.Contains(out, shortID(sleeper)) || strings.Contains(out, shortID(printer)) || !strings.Contains(out, "Up ") {
		t.Errorf("ps: got\n%s\nwant the running sleeper only", out)
	}
	if out := run(0, "ps", "-a"); !strings.Contains(out, shortID(printer)) || !strings.Contains(out, "Exited (0)") {
		t.Errorf("ps -a: got\n%s\nwant the exited printer too", out)
	}
	var procs []struct {
		ID      string `json:"id"`
		Running bool   `json:"running"`
	}
	if err := json.Unmarshal([]byte(run(0, "ps", "--json")), &procs); err != nil || len(procs) != 5 || procs[0].ID != sleeper || !procs[0].Running {
		t.Errorf("ps --json: got %+v, %v; want five processes, the sleeper first", procs, err)
	}
	if out := run(0, "ps", "-q"); strings.TrimSpace(out) != shortID(sleeper) {
		t.Errorf("ps -q: got %q, want the sleeper's ID", out)
	}
	if out := run(0, "stop", "--time", "1s", sleeper[:10]); strings.TrimSpace(out) != sleeper[:10] {
		t.Errorf("stop: got %q", out)
	}
	requireGone(t, ctx, pidFile)
	if out := run(0, "ps", "-a"); !strings.Contains(out, "killed by SIGTERM") {
		t.Errorf("ps -a after stop: got\n%s\nwant the sleeper killed by SIGTERM", out)
	}

	if _, errOut, code := cli(t, ctx, env, "logs", "nosuchid"); code != 1 || !strings.Contains(errOut, `no process "nosuchid"`) {
		t.Errorf("logs of an unknown ID: exit %d, stderr %q; want 1 and why", code, errOut)
	}
	if _, errOut, code := cli(t, ctx, env, "stop"); code != 2 || !strings.Contains(errOut, "give process IDs or --all") {
		t.Errorf("stop without IDs: exit %d, stderr %q; want 2 and usage", code, errOut)
	}
	if _, errOut, code := cli(t, ctx, []string{socketEnv + "=" + filepath.Join(dir, "nothing.sock")}, "ps"); code != 1 || !strings.Contains(errOut, "no agentproc serve on") {
		t.Errorf("ps without a serve: exit %d, stderr %q; want 1 and why", code, errOut)
	}

	// serve stops what it runs when it stops.
	pidFile = filepath.Join(dir, "left.pid")
	run(0, "run", "-d", "--", "echo $$ > "+pidFile+"; exec sleep 3600")
	waitFile(t, ctx, pidFile)
	if code := s.stop(t); code != 0 {
		t.Errorf("serve exit code %d after SIGTERM, want 0", code)
	}
	requireGone(t, ctx, pidFile)
	if _, err := os.Stat(sock); err == nil {
		t.Logf("the socket file stays after serve exits (the next serve replaces it)")
	}
}

func TestServeTCPNeedsToken(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := startServe(t, ctx, "--listen", "127.0.0.1:0", "--workdir", dir, "--grace", "2s")
	if len(s.token) != 64 || !strings.HasPrefix(s.addr, "http://127.0.0.1:") {
		t.Fatalf("serve printed token %q and address %q, want a generated token and a loopback URL", s.token, s.addr)
	}
	// The web page (httpapi.WithUI) is served at /.
	if resp, err := http.Get(s.addr + "/"); err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /: %v, %v; want the web page", resp, err)
	} else {
		resp.Body.Close()
		http.DefaultClient.CloseIdleConnections()
	}
	url := []string{"AGENTPROC_URL=" + s.addr}
	for _, token := range []string{"", "wrong"} {
		_, errOut, code := cli(t, ctx, append(url, tokenEnv+"="+token), "run", "--", "echo", "hi")
		if code != 1 || !strings.Contains(errOut, "401") {
			t.Errorf("run with token %q: exit %d, stderr %q; want refused with 401", token, code, errOut)
		}
	}
	out, errOut, code := cli(t, ctx, append(url, tokenEnv+"="+s.token), "run", "--", "echo", "hi")
	if code != 0 || out != "hi\n" {
		t.Fatalf("run with the token: exit %d, %q, %q", code, out, errOut)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(s.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code = cli(t, ctx, url, "run", "--token-file", tokenFile, "-d", "--", "sleep 3600")
	id := strings.TrimSpace(out)
	if code != 0 || len(id) != 36 {
		t.Fatalf("run -d with --token-file: exit %d, %q", code, out)
	}
	out, _, code = cli(t, ctx, append(url, tokenEnv+"="+s.token), "stop", "--all")
	if code != 0 || strings.TrimSpace(out) != id {
		t.Errorf("stop --all: exit %d, %q; want the sleeper's ID", code, out)
	}
	if code := s.stop(t); code != 0 {
		t.Errorf("serve exit code %d after SIGTERM, want 0", code)
	}
}

// TestTokenNeverOnCommandLine: a token given as an argument, which every
// local user reads in /proc/PID/cmdline, is refused by serve and the
// clients alike (exit 2, saying what to use instead), before serve listens
// or a client sends anything; --token-file is read.
func TestTokenNeverOnCommandLine(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0", "--workdir", dir, "--token", "s3cret"},
		{"run", "--url", "http://127.0.0.1:1", "--token", "s3cret", "--", "id"},
		{"ps", "--token=s3cret"},
	} {
		_, errOut, code := cli(t, ctx, nil, args...)
		if code != exitUsage || !strings.Contains(errOut, "--token puts the secret in the process list") || !strings.Contains(errOut, "--token-file") {
			t.Errorf("%q: got exit %d, stderr %q; want exit 2 and --token-file offered", args, code, errOut)
		}
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, ctx, "--listen", "127.0.0.1:0", "--workdir", dir, "--token-file", tokenFile)
	if s.token != "" {
		t.Errorf("serve printed a token (%q) though --token-file gave one", s.token)
	}
	url := []string{"AGENTPROC_URL=" + s.addr}
	if out, errOut, code := cli(t, ctx, url, "run", "--token-file", tokenFile, "--", "echo", "hi"); code != 0 || out != "hi\n" {
		t.Errorf("run with --token-file: got exit %d, %q, %q; want hi", code, out, errOut)
	}
	if _, errOut, code := cli(t, ctx, append(url, tokenEnv+"=wrong"), "ps"); code != 1 || !strings.Contains(errOut, "401") {
		t.Errorf("ps with a wrong token: got exit %d, %q; want 401", code, errOut)
	}
}

// TestServeRefusesOpenSocketDir: the default socket's directory must be
// the user's and closed to others, or serve refuses to listen there.
func TestServeRefusesOpenSocketDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runtimeDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(runtimeDir, "agentproc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(runtimeDir, "agentproc"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"XDG_RUNTIME_DIR=" + runtimeDir, socketEnv + "="}
	_, errOut, code := cli(t, ctx, env, "serve")
	if code != 1 || !strings.Contains(errOut, "has mode -rwxr-xr-x; others must not enter it") {
		t.Errorf("serve in an open directory: exit %d, stderr %q; want 1 and why", code, errOut)
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"1048576": 1 << 20, "64KiB": 64 << 10, "512MiB": 512 << 20, "2GiB": 2 << 30,
		"64K": 64 << 10, "1.5M": 3 << 19, "none": 0,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q): got %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1", "2TiB"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q): got %d, want an error", in, got)
		}
	}
}

// TestClientsRefuseForeignSocketDir: the clients apply serve's owner and
// mode check to the default socket's directory before dialing, so a server
// another local user planted there (possible where the directory is under
// the shared temp dir) never receives a command line or $AGENTPROC_TOKEN.
func TestClientsRefuseForeignSocketDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type planted struct {
		name  string
		setup func(dir string) error
	}
	cases := []planted{{"mode 0755", func(dir string) error { return os.Chmod(dir, 0o755) }}}
	if os.Getuid() == 0 {
		cases = append(cases, planted{"another user's", func(dir string) error { return os.Chown(dir, 65534, 65534) }})
	}
	for _, tc := range cases {
		runtimeDir := t.TempDir()
		dir := filepath.Join(runtimeDir, "agentproc")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("unix", filepath.Join(dir, "agentproc.sock"))
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan int)
		go func() {
			n := 0
			for {
				c, err := l.Accept()
				if err != nil {
					accepted <- n
					return
				}
				n++
				c.Close()
			}
		}()
		if err := tc.setup(dir); err != nil {
			t.Fatal(err)
		}
		env := []string{"XDG_RUNTIME_DIR=" + runtimeDir, socketEnv + "=", tokenEnv + "=s3cret"}
		for _, args := range [][]string{{"ps"}, {"run", "--", "id"}, {"logs", "x"}, {"stop", "--all"}} {
			_, errOut, code := cli(t, ctx, env, args...)
			if code != exitError || !strings.Contains(errOut, "not connecting to "+filepath.Join(dir, "agentproc.sock")) {
				t.Errorf("%s dir, %q: got exit %d, stderr %q; want exit 1 and not connecting", tc.name, args, code, errOut)
			}
		}
		l.Close()
		if n := <-accepted; n != 0 {
			t.Errorf("%s dir: the planted server got %d connections, want 0", tc.name, n)
		}
	}
}

// TestRunForwardsSignals: agentproc run -- CMD stopped by SIGTERM (kill,
// timeout, a CI cancel) or SIGHUP (the terminal closed) stops the remote
// command and exits with 128+N, instead of waiting for the command or
// dying with it left running; SIGINT (Ctrl-C) reaches the command as an
// interrupt, and a command it ends makes run exit 130 as well.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	_, env := serveInDir(t, ctx, dir, "--grace", "2s")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		pidFile := filepath.Join(dir, fmt.Sprintf("sleeper-%d.pid", sig))
		cmd := clientCmd(ctx, env, "run", "--", "echo $$ > "+pidFile+"; exec sleep 3600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFile(t, ctx, pidFile)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if got, want := cmd.ProcessState.ExitCode(), 128+int(sig); got != want {
			t.Errorf("run after %v: got exit %d, want %d", sig, got, want)
		}
		requireGone(t, ctx, pidFile)
	}
}

// TestRunAndLogsOnATerminal: run and logs write a command's output to a
// terminal (a pty) with its colours and without the sequences that would
// act on the person's terminal (clipboard, title, screen); to a pipe, the
// output passes byte for byte.
func TestRunAndLogsOnATerminal(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	_, env := serveInDir(t, ctx, dir, "--grace", "2s")
	script := filepath.Join(dir, "hostile")
	if err := os.WriteFile(script, []byte(hostile), 0o600); err != nil {
		t.Fatal(err)
	}
	onPTY := func(args ...string) string {
		t.Helper()
		ptmx, tty := openPTY(t)
		cmd := clientCmd(ctx, env, args...)
		cmd.Stdout = tty
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		got, _ := io.ReadAll(ptmx) // EIO once the last writer is gone
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%q: %v, %s", args, err, stderr.String())
		}
		// The terminal writes each \n as \r\n (onlcr).
		return strings.ReplaceAll(string(got), "\r\n", "\n")
	}
	const want = "\x1b[1;31mred\x1b[0m|||||||31m||é\r\n\tend"
	if got := onPTY("run", "--", "cat "+script); got != want {
		t.Errorf("run on a terminal: got %q, want %q", got, want)
	}
	out, _, code := cli(t, ctx, env, "run", "-d", "--", "cat "+script)
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("run -d: exit %d", code)
	}
	if got := onPTY("logs", "-f", id); got != want {
		t.Errorf("logs -f on a terminal: got %q, want %q", got, want)
	}
	if got := onPTY("logs", id); got != want {
		t.Errorf("logs on a terminal: got %q, want %q", got, want)
	}
	if got, _, _ := cli(t, ctx, env, "logs", id); got != hostile {
		t.Errorf("logs to a pipe: got %q, want the bytes unchanged", got)
	}
}

// TestRunReadyPortGivesUp: run -d --ready-port for a command that never
// listens gives up after --ready-timeout with exit 1, saying the command
// still runs and how to see why.
func TestRunReadyPortGivesUp(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	_, env := serveInDir(t, ctx, dir, "--grace", "2s")
	start := time.Now()
	_, errOut, code := cli(t, ctx, env, "run", "-d", "--ready-port", strconv.Itoa(freePort(t)), "--ready-timeout", "1s", "--", "sleep 3600")
	if took := time.Since(start); code != exitError || !strings.Contains(errOut, "within 1s; it is still running") || took > 20*time.Second {
		t.Errorf("run --ready-timeout 1s: got exit %d after %v, stderr %q; want exit 1 soon, and why", code, took, errOut)
	}
}

// TestClientVerbs: the verbs of docker habits beside ps, logs, stop and
// run: run -e and -i, wait with the exit code, inspect as JSON, logs
// --tail, input answering a prompt, rm (-f) and prune.
func TestClientVerbs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	_, env := serveInDir(t, ctx, dir, "--grace", "2s")
	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, errOut, code := cli(t, ctx, env, args...)
		if code != wantCode {
			t.Fatalf("agentproc %q: got exit %d, want %d\nstdout: %s\nstderr: %s", args, code, wantCode, out, errOut)
		}
		return out
	}
	if out := run(0, "run", "-e", "GREETING=hi there", "-e", "X=1", "--", `echo "$GREETING $X"`); out != "hi there 1\n" {
		t.Errorf("run -e: got %q, want the variables set", out)
	}
	counter := strings.TrimSpace(run(0, "run", "-d", "--", "seq 1 10; exit 3"))
	if out := run(3, "wait", counter[:8]); out != "3\n" {
		t.Errorf("wait: got %q, want the exit code 3", out)
	}
	var procs []struct {
		ID       string `json:"id"`
		ExitCode *int   `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(run(0, "inspect", counter[:8])), &procs); err != nil || len(procs) != 1 || procs[0].ID != counter || procs[0].ExitCode == nil || *procs[0].ExitCode != 3 {
		t.Errorf("inspect: got %+v, %v; want the counter with exit code 3", procs, err)
	}
	if out := run(0, "logs", "--tail", "2", counter); out != "9\n10\n" {
		t.Errorf("logs --tail 2: got %q, want the last two lines", out)
	}
	if out := run(0, "logs", "-n", "0", counter); out != "" {
		t.Errorf("logs -n 0: got %q, want nothing", out)
	}
	prompt := strings.TrimSpace(run(0, "run", "-d", "-i", "--", `printf 'name? '; read a; echo "hello $a"`))
	run(0, "input", prompt, "ada")
	if out := run(0, "wait", prompt); out != "0\n" {
		t.Errorf("wait after input: got %q, want 0", out)
	}
	if out := run(0, "logs", prompt); out != "name? hello ada\n" {
		t.Errorf("logs after input: got %q, want the greeting", out)
	}
	cmd := clientCmd(ctx, env, "run", "-i", "--", "tr a-z A-Z")
	cmd.Stdin = strings.NewReader("piped in\n")
	if out, err := cmd.Output(); err != nil || string(out) != "PIPED IN\n" {
		t.Errorf("run -i with stdin: got %q, %v; want it passed on", out, err)
	}
	sleeper := strings.TrimSpace(run(0, "run", "-d", "--", "sleep 3600"))
	if _, errOut, code := cli(t, ctx, env, "wait", "--timeout", "200ms", sleeper); code != exitError || !strings.Contains(errOut, "still running after 200ms") {
		t.Errorf("wait --timeout: got exit %d, stderr %q; want 1 and why", code, errOut)
	}

	// rm refuses a running process unless -f, which stops it first;
	// prune removes every exited one and keeps what runs.
	if _, errOut, code := cli(t, ctx, env, "rm", sleeper[:8]); code != exitError || !strings.Contains(errOut, "is running: stop it first, or use rm -f") {
		t.Errorf("rm of a running process: got exit %d, stderr %q; want 1 and what to do", code, errOut)
	}
	if out := run(0, "rm", counter[:8]); out != counter[:8]+"\n" {
		t.Errorf("rm: got %q, want the ID removed", out)
	}
	if out := run(0, "ps", "-a", "-q", "--no-trunc"); strings.Contains(out, counter) || !strings.Contains(out, sleeper) {
		t.Errorf("ps -a after rm: got %q, want the counter gone and the sleeper kept", out)
	}
	other := strings.TrimSpace(run(0, "run", "-d", "--", "sleep 3600"))
	if out := run(0, "rm", "-f", other); out != other+"\n" {
		t.Errorf("rm -f: got %q, want the ID removed", out)
	}
	if out := run(0, "prune"); len(strings.Fields(out)) != 3 || strings.Contains(out, sleeper) || !strings.Contains(out, prompt) {
		t.Errorf("prune: got %q, want the three exited processes and not the running one", out)
	}
	if out := run(0, "ps", "-a", "-q", "--no-trunc"); out != sleeper+"\n" {
		t.Errorf("ps -a after prune: got %q, want only the running process", out)
	}
	if out := run(0, "prune"); out != "" {
		t.Errorf("prune with nothing exited: got %q, want nothing", out)
	}
}

// TestLogsFollowThroughPrompt: logs -f of a process at a prompt shows what
// it prints after an answer given from elsewhere (agentproc input), as it
// comes, instead of waiting for the exit and dropping it.
func TestLogsFollowThroughPrompt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	_, env := serveInDir(t, ctx, dir, "--grace", "1s")
	out, _, code := cli(t, ctx, env, "run", "-d", "-i", "--", `printf 'name? '; read n; echo "hello $n"; read m; echo bye`)
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("run -d -i: exit %d", code)
	}
	for ctx.Err() == nil {
		if ps, _, _ := cli(t, ctx, env, "ps"); strings.Contains(ps, "waiting for input") {
			break
		}
	}
	logs := clientCmd(ctx, env, "logs", "-f", id)
	stdout, err := logs.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	if _, _, code := cli(t, ctx, env, "input", id, "ada"); code != 0 {
		t.Fatalf("input: exit %d", code)
	}
	// The greeting arrives while the process waits at its second read.
	line, err := r.ReadString('\n')
	if err != nil || line != "name? hello ada\n" {
		t.Fatalf("logs -f after the answer: got %q, %v; want the greeting before the exit", line, err)
	}
	if _, _, code := cli(t, ctx, env, "input", id, "x"); code != 0 {
		t.Fatalf("input: exit %d", code)
	}
	rest, _ := io.ReadAll(r)
	if err := logs.Wait(); err != nil || string(rest) != "bye\n" {
		t.Errorf("logs -f to the exit: got %q, %v; want bye", rest, err)
	}
}

// TestLogsSince: logs --since prints the output written since a time (RFC
// 3339) or a duration ago, and refuses what is neither. The child writes
// two lines four seconds apart on the real clock, as --since is about
// wall time; the split lies two seconds before the exit was seen.
func TestLogsSince(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, env := serveInDir(t, ctx, t.TempDir(), "--grace", "1s")
	out, _, code := cli(t, ctx, env, "run", "-d", "--", "echo old; sleep 4; echo new")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("run -d: exit %d", code)
	}
	if _, _, code := cli(t, ctx, env, "wait", id); code != 0 {
		t.Fatalf("wait: exit %d", code)
	}
	split := time.Now().Add(-2 * time.Second).Format(time.RFC3339Nano)
	if got, errOut, _ := cli(t, ctx, env, "logs", "--since", split, id); got != "new\n" {
		t.Errorf("logs --since %s: got %q (%s), want the line written after", split, got, errOut)
	}
	if got, _, _ := cli(t, ctx, env, "logs", "--since", "1h", id); got != "old\nnew\n" {
		t.Errorf("logs --since 1h: got %q, want all of it", got)
	}
	if got, _, _ := cli(t, ctx, env, "logs", "--since", "0s", id); got != "" {
		t.Errorf("logs --since 0s: got %q, want nothing", got)
	}
	if _, errOut, code := cli(t, ctx, env, "logs", "--since", "yesterday", id); code != exitUsage || !strings.Contains(errOut, "RFC 3339") {
		t.Errorf("logs --since yesterday: got exit %d, stderr %q; want 2 and what it takes", code, errOut)
	}
}

// openPTY opens a terminal, its master closed when the test ends; the
// caller closes tty once the command it is given to has started.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close() })
	return ptmx, tty
}

// onTerminal runs agentproc with its stdin and stderr on a terminal, as a
// person runs it, and its stdout to a pipe. When the terminal shows
// "[y/N] ", asked runs and answer is typed; without a question nothing is
// typed. It returns stdout, what the terminal showed, and the exit code.
func onTerminal(t *testing.T, ctx context.Context, env []string, asked func(), answer string, args ...string) (stdout, screen string, code int) {
	t.Helper()
	ptmx, tty := openPTY(t)
	cmd := clientCmd(ctx, env, args...)
	var out strings.Builder
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &out, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	chunks := make(chan string)
	go func() {
		defer close(chunks)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf) // EIO once the command has exited
			if n > 0 {
				select {
				case chunks <- string(buf[:n]):
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var sb strings.Builder
	answered := false
	for chunk := range chunks {
		sb.WriteString(chunk)
		if !answered && strings.Contains(sb.String(), "[y/N] ") {
			answered = true
			if asked != nil {
				asked()
			}
			if _, err := ptmx.WriteString(answer + "\n"); err != nil {
				t.Error(err)
			}
		}
	}
	code = exitStatus(t, args, cmd.Wait())
	return out.String(), strings.ReplaceAll(sb.String(), "\r\n", "\n"), code
}

// TestPruneAsksOnATerminal: prune on a terminal lists the exited processes
// and asks, as docker container prune does, removing nothing on n and just
// those listed on y (not one that exited while it asked); -f does not ask,
// and neither does a prune whose stdin is not a terminal (a script's or an
// agent's), which must not hang.
func TestPruneAsksOnATerminal(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, env := serveInDir(t, ctx, t.TempDir(), "--grace", "2s")
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(t, ctx, env, args...)
		if code != 0 {
			t.Fatalf("agentproc %q: got exit %d, want 0\nstdout: %s\nstderr: %s", args, code, out, errOut)
		}
		return out
	}
	exited := func() string {
		t.Helper()
		id := strings.TrimSpace(run("run", "-d", "--", "true"))
		run("wait", id)
		return id
	}
	remaining := func() string {
		t.Helper()
		return run("ps", "-a", "-q", "--no-trunc")
	}
	a, b := exited(), exited()
	sleeper := strings.TrimSpace(run("run", "-d", "--", "sleep 3600"))
	reader := strings.TrimSpace(run("run", "-d", "-i", "--", "read x"))

	out, screen, code := onTerminal(t, ctx, env, nil, "n", "prune")
	if code != 0 || out != "" || !strings.Contains(screen, "Remove 2 exited processes? [y/N] n\nNothing removed.") ||
		!strings.Contains(screen, shortID(a)) || !strings.Contains(screen, shortID(b)) || strings.Contains(screen, shortID(sleeper)) {
		t.Errorf("prune answered n: got exit %d, stdout %q, terminal %q; want exit 0, nothing removed, %s and %s listed and not %s",
			code, out, screen, shortID(a), shortID(b), shortID(sleeper))
	}
	t.Logf("prune on a terminal, answered n:\n%s", screen)
	if got := remaining(); !strings.Contains(got, a) || !strings.Contains(got, b) {
		t.Errorf("ps -a after prune answered n: got %q, want %s and %s kept", got, a, b)
	}

	// The reader exits while the question waits: y removes what was listed.
	endReader := func() {
		run("input", reader, "done")
		run("wait", reader)
	}
	out, screen, code = onTerminal(t, ctx, env, endReader, "y", "prune")
	if code != 0 || out != b+"\n"+a+"\n" || !strings.Contains(screen, "Remove 2 exited processes? [y/N] y") {
		t.Errorf("prune answered y: got exit %d, stdout %q, terminal %q; want exit 0 and %s, %s removed", code, out, screen, b, a)
	}
	if got := remaining(); got != reader+"\n"+sleeper+"\n" && got != sleeper+"\n"+reader+"\n" {
		t.Errorf("ps -a after prune answered y: got %q, want the sleeper and the reader, which exited after the list, kept", got)
	}

	out, screen, code = onTerminal(t, ctx, env, nil, "", "prune", "-f")
	if code != 0 || out != reader+"\n" || strings.Contains(screen, "[y/N]") {
		t.Errorf("prune -f on a terminal: got exit %d, stdout %q, terminal %q; want %s removed without a question", code, out, screen, reader)
	}

	c := exited()
	cmd := clientCmd(ctx, env, "prune")
	cmd.Stdin = strings.NewReader("n\n") // a pipe: read by no one
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if got, err := cmd.Output(); err != nil || string(got) != c+"\n" || strings.Contains(errOut.String(), "[y/N]") {
		t.Errorf("prune with stdin a pipe: got %q, %v, stderr %q; want %s removed without a question", got, err, errOut.String(), c)
	}
	if got := remaining(); got != sleeper+"\n" {
		t.Errorf("ps -a at the end: got %q, want only the sleeper", got)
	}
}

// TestServeExitsPromptlyWhenIdle: serve with nothing running, idle or after
// a command that has exited, exits within a second of SIGTERM (the review
// measured 1.8 s; a service stop or a script should not wait on it).
func TestServeExitsPromptlyWhenIdle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, ran := range []bool{false, true} {
		dir := t.TempDir()
		sock := filepath.Join(dir, "agentproc.sock")
		cmd := agentprocCmd("serve", "--socket", sock, "--workdir", dir, "--grace", "2s")
		// Under -race the runtime sleeps a second before any exit, for
		// late race reports (atexit_sleep_ms); an agentproc built for
		// use has no such wait.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
		s := startServeCmd(t, ctx, cmd)
		env := []string{socketEnv + "=" + sock}
		// A reply from ps shows the serve is serving, not only listening.
		if _, errOut, code := cli(t, ctx, env, "ps"); code != 0 {
			t.Fatalf("ps: exit %d, %s", code, errOut)
		}
		if ran {
			if out, errOut, code := cli(t, ctx, env, "run", "--", "echo done"); code != 0 || out != "done\n" {
				t.Fatalf("run: got exit %d, %q, %s; want done", code, out, errOut)
			}
		}
		start := time.Now()
		code := s.stop(t)
		took := time.Since(start)
		t.Logf("a command ran before: %v; serve exited %v after SIGTERM", ran, took)
		if code != 0 || took > time.Second {
			t.Errorf("serve (a command ran before: %v) after SIGTERM: got exit %d after %v, want exit 0 within 1s", ran, code, took)
		}
	}
}

// TestRunOutputGone: agentproc run whose output can no longer be written
// stops the remote command instead of leaving it running. Its terminal
// closing (a window shut, an ssh session dropped) sends run SIGHUP while
// the command prints and each write fails: exit 129. The reader of its
// pipe leaving (run -- CMD | head -1): exit 141, as when SIGPIPE ended
// run, which it did before with the command left running.
func TestRunOutputGone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	_, env := serveInDir(t, ctx, dir, "--grace", "2s")
	ticker := func(pidFile string) string {
		return "echo $$ > " + pidFile + "; while :; do echo tick; done"
	}

	pidFile := filepath.Join(dir, "on-terminal.pid")
	ptmx, tty := openPTY(t)
	cmd := clientCmd(ctx, env, "run", "--", ticker(pidFile))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	// run leads a session whose controlling terminal is the pty, as in a
	// terminal window: closing the terminal's side sends it SIGHUP.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	if _, err := bufio.NewReader(ptmx).ReadString('\n'); err != nil {
		t.Fatalf("reading the terminal: %v", err)
	}
	waitFile(t, ctx, pidFile)
	ptmx.Close()
	_ = cmd.Wait()
	if got, want := cmd.ProcessState.ExitCode(), 128+int(syscall.SIGHUP); got != want {
		t.Errorf("run after its terminal closed: got exit %d (%v), want %d", got, cmd.ProcessState, want)
	}
	requireGone(t, ctx, pidFile)

	pidFile = filepath.Join(dir, "piped.pid")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd = clientCmd(ctx, env, "run", "--", ticker(pidFile))
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if line, err := bufio.NewReader(r).ReadString('\n'); err != nil || line != "tick\n" {
		t.Fatalf("reading the pipe: got %q, %v; want tick", line, err)
	}
	waitFile(t, ctx, pidFile)
	r.Close() // as head -1 exits
	_ = cmd.Wait()
	if got, want := cmd.ProcessState.ExitCode(), 128+int(syscall.SIGPIPE); got != want {
		t.Errorf("run after its pipe's reader left: got exit %d (%v), want %d", got, cmd.ProcessState, want)
	}
	requireGone(t, ctx, pidFile)
}

// TestHangupStopsEverything: serve and mcp that get SIGHUP (the terminal
// of agentproc serve & closed) stop every process they run before they
// exit, as on SIGTERM, instead of dying at once with them left running.
func TestHangupStopsEverything(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	s, env := serveInDir(t, ctx, dir, "--grace", "2s")
	pidFile := filepath.Join(dir, "served.pid")
	if _, errOut, code := cli(t, ctx, env, "run", "-d", "--", "echo $$ > "+pidFile+"; exec sleep 3600"); code != 0 {
		t.Fatalf("run -d: exit %d, %s", code, errOut)
	}
	waitFile(t, ctx, pidFile)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("serve after SIGHUP: got %v, want exit 0", err)
	}
	requireGone(t, ctx, pidFile)

	cmd := agentprocCmd("mcp", "--workdir", dir, "--sandbox", "none", "--grace", "2s")
	c := newGoClient(t, ctx, cmd)
	defer c.close()
	pidFile = filepath.Join(dir, "mcp.pid")
	res, err := c.call(ctx, "execute", map[string]any{"command": "echo $$ > " + pidFile + "; exec sleep 3600", "run_in_background": true}, false)
	if err != nil || res.isError {
		t.Fatalf("execute: %+v, %v", res, err)
	}
	waitFile(t, ctx, pidFile)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	requireGone(t, ctx, pidFile)
}
