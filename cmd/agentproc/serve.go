package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

const serveHelp = `Serve the HTTP API (package httpapi) for people, scripts and agents that
speak HTTP. By default it listens on a Unix socket that only your user can
open (mode 0600, in a directory of mode 0700): no token is needed, the file
system is the lock. With --listen it listens on a TCP address instead, and
then only with a bearer token: --token-file, $AGENTPROC_TOKEN, or one
generated and printed to stderr (never --token VALUE: every local user can
read a command line). Whoever holds the token runs commands as you.

The client commands (ps, logs, stop, run, wait, inspect, input, rm,
prune) talk to it, and a web page at / shows the processes and their
output live, to follow them, answer their prompts and stop them (with
--listen, open the URL serve prints, which carries the token in its
fragment). Every process stops when serve stops (SIGINT, SIGTERM or SIGHUP).

With --coder the process API of Coder's workspace agent is served too,
under /api/v0/processes (httpapi.WithCoderCompat).

Examples:
  # On the default Unix socket:
  agentproc serve &
  agentproc run -- echo hello

  # On TCP, with a token generated and printed:
  agentproc serve --listen 127.0.0.1:7070

  # With a token of your own, and the Coder profile (the sandbox hides
  # ~/.config/agentproc from every tree):
  install -d -m 700 ~/.config/agentproc
  (umask 077; openssl rand -hex 32 > ~/.config/agentproc/token)
  agentproc serve --listen 127.0.0.1:7070 --token-file ~/.config/agentproc/token --coder
`

// tokenEnv holds the bearer token for serve --listen and the clients.
const tokenEnv = "AGENTPROC_TOKEN"

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlags("serve", "[flags]", serveHelp)
	var mf managerFlags
	home, _ := os.UserHomeDir()
	mf.register(fs, home, "most processes each owner (X-Agentproc-Owner) may run at once; a start beyond it gets 429 (0: no cap)")
	mf.registerSandbox(fs, "none")
	socket := fs.String("socket", "", "Unix socket to listen on (default "+displaySocket()+")")
	listen := fs.String("listen", "", "TCP address to listen on instead of the socket, such as 127.0.0.1:7070; needs a token")
	var tf tokenFlags
	tf.register(fs, "bearer token clients must send, read from this file (default $"+tokenEnv+", or generated with --listen)")
	coder := fs.Bool("coder", false, "also serve Coder's process API under /api/v0/processes")
	if rest, err := parse(fs, e, args, 0); err != nil {
		return err
	} else if err := noArgs(rest); err != nil {
		return err
	}
	if *listen != "" && *socket != "" {
		return usagef("use --socket or --listen, not both")
	}
	token, err := tf.token()
	if err != nil {
		return err
	}
	opts, err := mf.options()
	if err != nil {
		return err
	}

	var l net.Listener
	if *listen != "" {
		generated := token == ""
		if generated {
			if token, err = newToken(); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "agentproc serve: no token given; clients must send this one:\n%s=%s\n", tokenEnv, token)
		}
		if l, err = net.Listen("tcp", *listen); err != nil {
			return err
		}
		// The page reads the token from the URL's fragment, which the
		// browser never sends. A token of the user's own is not echoed.
		shown := "TOKEN"
		if generated {
			shown = token
		}
		fmt.Fprintf(e.stderr, "agentproc serve: web page: http://%s/#token=%s\n", l.Addr(), shown)
	} else {
		path := *socket
		if path == "" {
			if path, err = defaultSocket(true); err != nil {
				return err
			}
		}
		if l, err = listenUnix(path); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stderr, "agentproc serve: listening on %s\n", listenerName(l))

	sb, err := mf.sandboxPolicy(false)
	if err != nil {
		l.Close()
		return err
	}
	if sb, err = hideTokenFile(sb, tf.file, mf.workdir); err != nil {
		l.Close()
		return err
	}
	opts = append(opts, redactToken(token)...)
	// The operator's policy is the Manager's default, which a client of
	// the API can only narrow (httpapi's "sandbox" field).
	m := agentproc.New(append(opts, agentproc.WithSandbox(sb))...)
	if err := recovered(ctx, m, &mf, e.stderr); err != nil {
		m.Close()
		l.Close()
		return err
	}
	if sb != nil {
		if err := probeSandbox(m, nil, mf.workdir); err != nil {
			m.Close()
			l.Close()
			return fmt.Errorf("the workspace sandbox cannot confine commands in %s here: %w", mf.workdir, err)
		}
	}
	srv := &http.Server{
		Handler:           capRunning(m, mf.maxRunning, token, serveMux(m, token, *coder)),
		ReadHeaderTimeout: 10 * time.Second,
	}
	refuseConfinedPeers(srv)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	// Stop accepting, end the held waits, then stop every process.
	sctx, cancel := context.WithTimeout(context.Background(), mf.grace+5*time.Second)
	defer cancel()
	_ = srv.Close()
	if err := m.Shutdown(sctx); err != nil {
		return fmt.Errorf("stopping the processes: %w", err)
	}
	mf.endSession()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// hideTokenFile hides --token-file's file from serve's sandboxed trees:
// the credential list names ~/.config/agentproc, not a path the operator
// chooses, and a tree that reads the token drives serve unconfined
// (seventh attack review, TestAttackServeTokenFileHiddenAndRedacted). A file
// inside the work dir cannot be hidden there and is refused.
func hideTokenFile(sb *agentproc.Sandbox, file, workdir string) (*agentproc.Sandbox, error) {
	if sb == nil || file == "" {
		return sb, nil
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, usagef("--token-file: %v", err)
	}
	if wd, err := filepath.Abs(workdir); err == nil && (abs == wd || strings.HasPrefix(abs, wd+string(filepath.Separator))) {
		return nil, usagef("--token-file %s lies in --workdir, where the commands could read it: keep it elsewhere", file)
	}
	sb.Hide = append(sb.Hide, abs)
	return sb, nil
}

// redactToken returns the option that redacts serve's token from what its
// commands print, where it is long enough to be a secret the Manager
// takes (a token from --token-file is in no environment the Manager
// reads; a shorter one is left, as WithSecrets would refuse it).
func redactToken(token string) []agentproc.Option {
	if len(token) < agentproc.MinSecretBytes || len(token) > agentproc.MaxSecretBytes {
		return nil
	}
	return []agentproc.Option{agentproc.WithSecrets(map[string]string{tokenEnv: token})}
}

// serveMux is the handler serve serves: the API at the root, Coder's under
// its prefix with --coder, both behind the token when there is one.
func serveMux(m *agentproc.Manager, token string, coder bool) http.Handler {
	// Without a token the listener is the Unix socket, whose mode (0600)
	// is the authentication: the hook only says so, which also keeps
	// NewHandler from warning that nothing authenticates.
	opts := []httpapi.Option{httpapi.WithAuthorize(func(r *http.Request) (string, error) {
		return r.Header.Get(httpapi.DefaultOwnerHeader), nil
	})}
	if token != "" {
		want := []byte("Bearer " + token)
		opts = []httpapi.Option{httpapi.WithAuthorize(func(r *http.Request) (string, error) {
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
				return "", errors.New("send the token as Authorization: Bearer TOKEN (see agentproc serve --help)")
			}
			// The token proves who may use the server; the owner header
			// still separates the agents that share it.
			return r.Header.Get(httpapi.DefaultOwnerHeader), nil
		})}
	}
	mux := http.NewServeMux()
	// The web page (httpapi.WithUI) is served at / beside the API.
	mux.Handle("/", httpapi.NewHandler(m, append(opts, httpapi.WithUI())...))
	if coder {
		mux.Handle("/api/v0/processes/", http.StripPrefix("/api/v0/processes", httpapi.NewHandler(m, append(opts, httpapi.WithCoderCompat())...)))
	}
	return mux
}

// tokenFlags are --token-file, and --token, kept only to refuse a secret
// written on the command line, which /proc/PID/cmdline shows every local
// user.
type tokenFlags struct {
	file  string
	value string
}

func (t *tokenFlags) register(fs *flag.FlagSet, usage string) {
	fs.StringVar(&t.file, "token-file", "", usage)
	fs.StringVar(&t.value, "token", "", "refused: every local user can read a command line; use --token-file or $"+tokenEnv)
}

// token returns the token of --token-file, else of $AGENTPROC_TOKEN, else
// "".
func (t *tokenFlags) token() (string, error) {
	if t.value != "" {
		return "", usagef("--token puts the secret in the process list, readable by every local user; use --token-file FILE or $%s", tokenEnv)
	}
	if t.file == "" {
		return os.Getenv(tokenEnv), nil
	}
	b, err := os.ReadFile(t.file)
	if err != nil {
		return "", usagef("--token-file: %v", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, "\r\n") {
		return "", usagef("--token-file %s: want one line holding the token", t.file)
	}
	return tok, nil
}

// newToken returns 32 random bytes in hex.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// socketEnv names the Unix socket for serve and the clients.
const socketEnv = "AGENTPROC_SOCKET"

// displaySocket is the default socket as --help shows it.
func displaySocket() string {
	p, err := defaultSocket(false)
	if err != nil {
		return "$" + socketEnv + ", or agentproc.sock in $XDG_RUNTIME_DIR"
	}
	return p
}

// defaultSocket is $AGENTPROC_SOCKET, else agentproc/agentproc.sock in
// $XDG_RUNTIME_DIR, else in a directory of the user's own under the temp
// dir. With create it makes the directory (mode 0700) when missing, and
// checks that an existing one is the user's and closed to others, as ssh
// does with ~/.ssh: a socket in a directory another user controls could be
// swapped for theirs.
func defaultSocket(create bool) (string, error) {
	if p := os.Getenv(socketEnv); p != "" {
		return p, nil
	}
	dir := filepath.Join(os.TempDir(), "agentproc-"+userTag())
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
		dir = filepath.Join(rt, "agentproc")
	}
	if create {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", err
		}
		if err := checkPrivateDir(dir); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "agentproc.sock"), nil
}

// listenUnix listens on path with mode 0600. A socket file left by a serve
// that died is replaced; a live one is an error, so two serves never share
// a path.
func listenUnix(path string) (net.Listener, error) {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("another agentproc serve is listening on %s", path)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; remove it or pick another --socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	// The socket is created with the umask's mode: make it private from
	// the start rather than chmod it after others could have connected.
	l, err := listenPrivate(path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func listenerName(l net.Listener) string {
	if l.Addr().Network() == "unix" {
		return l.Addr().String() + " (Unix socket, mode 0600)"
	}
	host, _, _ := net.SplitHostPort(l.Addr().String())
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "http://" + l.Addr().String() + " (reachable from other machines: keep the token secret)"
	}
	return "http://" + strings.TrimSuffix(l.Addr().String(), "/")
}
