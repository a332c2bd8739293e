package agentproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testuser"
	"github.com/agentproc/agentproc/llmtool"
)

// Tests of the eleventh attack review (unprivileged and the surfaces):
// docs/sandbox-threats.md, "Eleventh attack review (unprivileged and the
// surfaces)".

// TestAttackKerberosTicketCache: a Kerberos user's tickets live in a file
// cache, by default /tmp/krb5cc_UID (MIT's and Heimdal's built-in
// default_ccache_name), /tmp/krb5cc_UID_XXXXXX where sssd makes them, or
// wherever KRB5CCNAME names (FILE:path, or DIR:path for a collection). The
// cache holds the ticket-granting ticket and its session key: whoever
// reads the file is the user to every Kerberised service (ssh with GSSAPI,
// NFS, HTTP with SPNEGO, LDAP) until it expires, ten hours by default.
// WorkspaceSandbox hid the host's keytab (/etc/krb5.keytab), not the
// user's tickets: a tree read each of them. The control reads them without
// the sandbox. Runs as root and, through TestAttack11uUnprivileged, not.
func TestAttackKerberosTicketCache(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	caches := map[string]string{} // KRB5CCNAME -> the file it leads to
	fileCC := filepath.Join(t.TempDir(), "krb5cc_file")
	caches["FILE:"+fileCC] = fileCC
	dirCC := t.TempDir()
	caches["DIR:"+dirCC] = filepath.Join(dirCC, "tktABCDEF")
	// The default and sssd's caches are made in a directory of the test's
	// own that stands for /tmp (SetKerberosCacheDir): made in the real
	// /tmp, they were hidden from policies other tests resolved meanwhile,
	// and a policy whose Write held /tmp refused its Start. They are read
	// under any KRB5CCNAME.
	tmp := t.TempDir()
	agentproc.SetKerberosCacheDir(t, tmp)
	def := filepath.Join(tmp, fmt.Sprintf("krb5cc_%d", os.Getuid()))
	sssd, err := os.CreateTemp(tmp, fmt.Sprintf("krb5cc_%d_", os.Getuid()))
	if err != nil {
		t.Fatal(err)
	}
	_ = sssd.Close()
	defaults := []string{def, sssd.Name()}
	secret := func(p string) string { return "TICKET-" + filepath.Base(p) }
	for _, p := range append(defaults, fileCC, caches["DIR:"+dirCC]) {
		if err := os.WriteFile(p, []byte(secret(p)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, cc := range caches {
		t.Setenv("KRB5CCNAME", name)
		paths := append([]string{cc}, defaults...)
		var cmd strings.Builder
		for _, p := range paths {
			cmd.WriteString("cat " + shellQuote(p) + "; ")
		}
		cmd.WriteString("true")
		req := agentproc.Request{Command: cmd.String(), WorkDir: ws, Timeout: time.Minute}
		plain := newManager(t, agentproc.WithRedaction(false))
		ctl := runSandboxed(t, plain, req).Text
		for _, p := range paths {
			if !strings.Contains(ctl, secret(p)) {
				t.Fatalf("control without the sandbox: %s not read, output %q", p, ctl)
			}
		}
		m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
		out := runSandboxed(t, m, req).Text
		for _, p := range paths {
			if strings.Contains(out, secret(p)) {
				t.Errorf("KRB5CCNAME=%s: %s: got it read, want it hidden", name, p)
			}
		}
	}
}

// walletFiles are the cryptocurrency wallets' key files at their tools'
// default places, relative to the home directory: Solana's CLI keypair
// (solana-keygen new writes the private key in the clear; Anchor signs
// with it), Sui's keystore (private keys, base64, in the clear), NEAR's
// credentials (private keys in the clear), geth's and Foundry's keystores
// (keys encrypted with a password, which a guess or a brute force opens
// offline), Bitcoin Core's wallets (the descriptor wallets' dirs and the
// legacy wallet.dat, unencrypted unless the user chose otherwise) and
// Electrum's wallets.
var walletFiles = []string{
	".config/solana/id.json", ".sui/sui_config/sui.keystore", ".near-credentials/mainnet/alice.near.json",
	".ethereum/keystore/UTC--2026-01-01T00-00-00.000Z--0123", ".foundry/keystores/deployer",
	".bitcoin/wallets/default/wallet.dat", ".bitcoin/wallet.dat", ".electrum/wallets/default_wallet",
}

// TestAttackWalletKeys: the wallets above, whose keys move money, were
// read by a tree under WorkspaceSandbox: a model working on a dApp (the
// Solana, Sui and Ethereum tool chains keep their keys in the home
// directory) printed the deployer's key to itself. The control reads them
// without the sandbox. Runs as root and, through
// TestAttack11uUnprivileged, not.
func TestAttackWalletKeys(t *testing.T) {
	attackHomeFiles(t, walletFiles)
}

// TestAttackDevPlatformTokens: Coder's CLI session token
// (~/.config/coderv2/session, written by `coder login`: the user's
// workspaces and their terminals), Okta's management API token
// (~/.okta/okta.yaml, the SDKs' and okta CLI's config) and the Twilio
// CLI's API key and secret were read by a tree. The control reads them
// without the sandbox. Runs as root and, through
// TestAttack11uUnprivileged, not.
func TestAttackDevPlatformTokens(t *testing.T) {
	attackHomeFiles(t, []string{".config/coderv2/session", ".okta/okta.yaml", ".twilio-cli/config.json"})
}

// TestAttackMoreAgentTokens: coding agents the ninth review's list did not
// name keep their logins beside it: Qwen Code (a gemini-cli fork) its
// OAuth tokens in ~/.qwen/oauth_creds.json and MCP servers' env in
// ~/.qwen/settings.json, Amp its API key in
// ~/.local/share/amp/secrets.json and its prompt history beside it, goose
// its providers' keys in ~/.config/goose/secrets.yaml where no keyring
// runs (containers, servers). A tree read each. The control reads them
// without the sandbox. Runs as root and, through
// TestAttack11uUnprivileged, not.
func TestAttackMoreAgentTokens(t *testing.T) {
	attackHomeFiles(t, []string{".qwen/oauth_creds.json", ".qwen/oauth_creds.json.bak", ".qwen/settings.json",
		".local/share/amp/secrets.json", ".local/share/amp/history.jsonl", ".config/goose/secrets.yaml"})
}

// TestAttackAgentIDEBridgeTokens: Claude Code's IDE integration (the VS
// Code and JetBrains extensions, and editors that speak its protocol)
// runs a WebSocket MCP server on loopback and writes its port and
// authToken to ~/.claude/ide/PORT.lock; GitHub Copilot CLI's bridge does
// the same in ~/.copilot/ide. With the token a client drives the editor's
// tools (open files, diagnostics, and where the extension offers it, code
// run in the editor's kernel). Claude Code's checkpoints keep the files it
// edited, in every project, under ~/.claude/file-history (another
// project's .env included). A tree read each. The control reads them
// without the sandbox. Runs as root and, through
// TestAttack11uUnprivileged, not.
func TestAttackAgentIDEBridgeTokens(t *testing.T) {
	attackHomeFiles(t, []string{".claude/ide/41234.lock", ".copilot/ide/41235.lock", ".claude/file-history/0f3c/1a2b@v1"})
}

// attackHomeFiles writes each of rels under a fresh home, checks that a
// tree reads them all without the sandbox (the control) and none under
// WorkspaceSandbox.
func attackHomeFiles(t *testing.T, rels []string) {
	t.Helper()
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	var cmd strings.Builder
	for i, rel := range rels {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("HOMESECRET-%d\n", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd.WriteString("cat " + shellQuote(p) + "; ")
	}
	cmd.WriteString("true")
	req := agentproc.Request{Command: cmd.String(), WorkDir: ws, Timeout: time.Minute}
	plain := newManager(t, agentproc.WithRedaction(false))
	if got := strings.Count(runSandboxed(t, plain, req).Text, "HOMESECRET-"); got != len(rels) {
		t.Fatalf("control without the sandbox: got %d files read, want %d", got, len(rels))
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, req).Text
	for i, rel := range rels {
		if strings.Contains(out, fmt.Sprintf("HOMESECRET-%d\n", i)) {
			t.Errorf("~/%s: got it read, want it hidden", rel)
		}
	}
}

// missedSecretNames are names that hold secrets in common use which the
// environment's name rule passed: CREDS (GCP_CREDS, DOCKER_CREDS,
// REGISTRY_CREDS), PW as a word after another (DB_PW, ADMIN_PW, SMTP_PW),
// and a wallet's seed phrase (MNEMONIC: Hardhat's and Truffle's configs
// read process.env.MNEMONIC; SEED_PHRASE).
var missedSecretNames = []string{"GCP_CREDS", "docker_creds", "DB_PW", "ADMIN_PW", "MNEMONIC", "WALLET_MNEMONIC", "SEED_PHRASE"}

// TestAttackEnvNamesMissed: the host's variables named as above reached
// a sandboxed tree's environment, and, the redaction's default set being
// chosen by the same rule, its output raw: `env` printed them. The
// control: an innocent name passes, and a name the rule knows is dropped.
// Runs as root and, through TestAttack11uUnprivileged, not.
func TestAttackEnvNamesMissed(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	for i, name := range missedSecretNames {
		t.Setenv(name, fmt.Sprintf("ENVSECRET-%d-q8Zx3", i))
	}
	t.Setenv("AGENTPROC_TEST_INNOCENT", "INNOCENT-VALUE")
	t.Setenv("AGENTPROC_TEST_TOKEN", "ENVSECRET-known-q8Zx3")
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, agentproc.Request{Command: "env", WorkDir: ws, Timeout: time.Minute}).Text
	if !strings.Contains(out, "INNOCENT-VALUE") || strings.Contains(out, "AGENTPROC_TEST_TOKEN") {
		t.Fatalf("control: got %q, want the innocent name passed and the token's dropped", out)
	}
	for i, name := range missedSecretNames {
		if strings.Contains(out, name+"=") || strings.Contains(out, fmt.Sprintf("ENVSECRET-%d-", i)) {
			t.Errorf("%s: got it in the tree's environment, want it dropped", name)
		}
	}
}

// TestAttackHostPOSIXSharedMemory: POSIX shared memory and named
// semaphores (shm_open, sem_open) are files in /dev/shm, a tmpfs every
// user shares, checked by owner and mode alone. The review of System V IPC
// (an IPC namespace as root; open without root) and of POSIX message
// queues (no rule reaches the mqueue mount) left it out: a tree read the
// host user's 0600 object (as root, root's), whatever the host keeps there
// (a database's dynamic shared memory, a multiprocessing pool's arrays, a
// browser's buffers). Trees could not create objects there already (no
// write right). The control reads it without the sandbox; a policy whose
// Write holds /dev/shm keeps it whole. Runs as root and, through
// TestAttack11uUnprivileged, not.
func TestAttackHostPOSIXSharedMemory(t *testing.T) {
	requireSandbox(t)
	f, err := os.CreateTemp("/dev/shm", "agentproc-attack11u-")
	if err != nil {
		t.Skipf("no /dev/shm here: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	if _, err := f.WriteString("SHMSECRET-q8Zx3\n"); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	ws := t.TempDir()
	req := agentproc.Request{Command: "cat " + shellQuote(f.Name()) + "; true", WorkDir: ws, Timeout: time.Minute}
	plain := newManager(t, agentproc.WithRedaction(false))
	if ctl := runSandboxed(t, plain, req).Text; !strings.Contains(ctl, "SHMSECRET-") {
		t.Fatalf("control without the sandbox: got %q, want the object read", ctl)
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	// (Its name stays listable without root, as in any hidden directory:
	// docs/sandbox.md.)
	if out := runSandboxed(t, m, req).Text; strings.Contains(out, "SHMSECRET-") {
		t.Errorf("got %q, want the host's object unreadable", out)
	}
	// A policy that writes /dev/shm (for a browser, a multiprocessing
	// pool) keeps it whole.
	sb := agentproc.WorkspaceSandbox(ws)
	sb.Write = append(sb.Write, "/dev/shm")
	shm := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(sb))
	own := filepath.Join("/dev/shm", "agentproc-attack11u-own-"+strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { _ = os.Remove(own) })
	out := runSandboxed(t, shm, agentproc.Request{Command: "echo OWN > " + own + " && cat " + own + " " + shellQuote(f.Name()), WorkDir: ws, Timeout: time.Minute}).Text
	if !strings.Contains(out, "OWN") || !strings.Contains(out, "SHMSECRET-") {
		t.Errorf("with Write holding /dev/shm: got %q, want the tree's own object and the host's read", out)
	}
}

// TestAttackToolWorkdirUnderDefaultSandbox: llmtool checks a model's
// workdir against Options.Sandbox, since a work dir is writable to its
// tree; with Options.Sandbox nil ("the Manager's default") it checked
// nothing, and the Manager's WithSandbox(WorkspaceSandbox(ws)), the
// natural way to confine a Toolbox's commands, then made any workdir the
// model named writable: ~/.local/bin (first in PATH on Debian and Ubuntu:
// a `git` there is what the agent runs next, unconfined), ~/.config/
// systemd/user or ~/.config/autostart (run at the next login). httpapi
// holds a workdir within the Manager's default already. The control: the
// same call with workdir inside ws runs, and the tree cannot write outside
// ws from there. Runs as root and, through TestAttack11uUnprivileged, not.
func TestAttackToolWorkdirUnderDefaultSandbox(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws, bin := filepath.Join(home, "project"), filepath.Join(home, ".local", "bin")
	for _, d := range []string{ws, bin} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	tb := llmtool.New(m.Scope("model"), llmtool.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	call := func(dir string) (string, error) {
		args, _ := json.Marshal(map[string]any{"command": "printf '#!/bin/sh\\necho PWNED\\n' > git && echo WROTE", "workdir": dir})
		return tb.Dispatch(ctx, "execute", args, nil)
	}
	if out, err := call(ws); err != nil || !strings.Contains(out, "WROTE") {
		t.Fatalf("control: workdir inside the sandbox: got %v (%q), want the write done", err, out)
	}
	out, err := call(bin)
	if _, serr := os.Stat(filepath.Join(bin, "git")); serr == nil {
		t.Errorf("workdir %s: the tree wrote ~/.local/bin/git (%v, %q), want the call refused", bin, err, out)
	}
	if err == nil || !strings.Contains(err.Error(), "outside the sandbox") {
		t.Errorf("workdir %s: got %v (%q), want an error saying it is outside the sandbox", bin, err, out)
	}
}

// TestAttackReadOnlyLinkRefusesEveryStart: WorkspaceSandbox makes ws/.git
// read-only, and a tree may make it where it does not exist (the Start
// warns so; without root .git is writable anyway). A tree that made it a
// link out of the workspace (`ln -s ~ .git`) had every later Start of the
// policy refused, "Sandbox.ReadOnly … is not inside a writable
// directory": the model's every command failed, from the next session
// on, until a person removed the link. A link out of the writable dir it is named in is read-only
// already (writes through it reach a target outside Write), so the Start
// runs; the control shows the tree made the link, and the next tree
// cannot write through it. Runs as root and, through
// TestAttack11uUnprivileged, not.
func TestAttackReadOnlyLinkRefusesEveryStart(t *testing.T) {
	requireSandbox(t)
	ws, outside := t.TempDir(), t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	made := runSandboxed(t, m, agentproc.Request{Command: "ln -s " + shellQuote(outside) + " .git && echo LINKED", WorkDir: ws, Timeout: time.Minute}).Text
	if target, err := os.Readlink(filepath.Join(ws, ".git")); err != nil || target != outside || !strings.Contains(made, "LINKED") {
		t.Fatalf("control: the tree's link: got %q, %v (output %q), want .git -> %s", target, err, made, outside)
	}
	// The next session (agentproc mcp started again, the agent restarted)
	// resolves the policy afresh; the Manager that ran the tree may keep
	// its resolved policy for a while.
	next := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	p, err := next.Start(t.Context(), agentproc.Request{Command: "echo x > .git/config; echo STARTED", WorkDir: ws, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("the next Start: got %v, want it to run", err)
	}
	mustWait(t, p)
	if out := p.Output().Text; !strings.Contains(out, "STARTED") {
		t.Errorf("the next tree: got %q, want it to run", out)
	}
	if _, err := os.Stat(filepath.Join(outside, "config")); err == nil {
		t.Errorf("the next tree wrote %s through the link, want it refused", filepath.Join(outside, "config"))
	}
}

// TestAttackGitCredentialCache: `git config credential.helper cache` (the
// usual helper on Linux, which GitHub's docs suggest) keeps the user's
// HTTPS password or token in a daemon that answers on a pathname socket,
// ~/.cache/git/credential/socket (~/.git-credential-cache/socket where that
// directory exists), for its timeout. It was neither a hidden path nor a
// door: a sandboxed tree ran `git credential-cache get` for github.com and
// printed the cached token, as root and not. The control: the same
// request from an unsandboxed tree gets it. As root the directories are
// now hidden (covered whole, socket included); without root a pathname
// socket stays reachable (docs/sandbox.md, "Pathname Unix sockets").
func TestAttackGitCredentialCache(t *testing.T) {
	requireSandbox(t)
	if !isRoot() {
		t.Skip("open: without root a hidden directory hides the files in it, not its pathname sockets (Landlock ABI 7 does not govern connect(2)): git's credential-cache daemon answers a tree")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	git := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v (%s)", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	git("protocol=https\nhost=github.com\nusername=u\npassword=GITCACHE-q8Zx3\n\n", "credential-cache", "--timeout=120", "store")
	t.Cleanup(func() { _ = exec.Command("git", "credential-cache", "exit").Run() })
	req := agentproc.Request{Command: `printf 'protocol=https\nhost=github.com\n\n' | git credential-cache get; true`, WorkDir: ws, Timeout: time.Minute}
	plain := newManager(t, agentproc.WithRedaction(false))
	if ctl := runSandboxed(t, plain, req).Text; !strings.Contains(ctl, "GITCACHE-") {
		t.Fatalf("control without the sandbox: got %q, want the cached password", ctl)
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	if out := runSandboxed(t, m, req).Text; strings.Contains(out, "GITCACHE-") {
		t.Errorf("got %q, want the credential cache out of reach", out)
	}
}

// TestAttackLocalVMKeys: Lima (`limactl`) and Colima, which run the
// container engine of many Linux and macOS developers in a VM that mounts
// the home directory, keep the VM's ssh private key at
// ~/.lima/_config/user and ~/.colima/_lima/_config/user: a tree read both.
// The control reads them without the sandbox. Runs as root and, through
// TestAttack11uUnprivileged, not.
func TestAttackLocalVMKeys(t *testing.T) {
	attackHomeFiles(t, []string{".lima/_config/user", ".colima/_lima/_config/user"})
}

// TestAttackHomeEngineSockets: the container engines a user runs keep
// their sockets in the home directory, where neither the door list nor
// the credential list looked: Docker Desktop for Linux's
// ~/.docker/desktop/docker.sock, Colima's ~/.colima/default/docker.sock
// (a container that mounts / runs anything as root on the host's files),
// and Lima's ssh ControlMaster ~/.lima/NAME/ssh.sock (commands in the VM,
// which mounts the home). As root they are now covered (the directories
// hidden whole); without root a pathname socket stays reachable. The
// control: an unconfined tree connects to each.
func TestAttackHomeEngineSockets(t *testing.T) {
	requireSandbox(t)
	if !isRoot() {
		t.Skip("open: without root a hidden directory hides the files in it, not its pathname sockets (Landlock ABI 7 does not govern connect(2)): the engines' sockets in the home are reached")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	socks := []string{".docker/desktop/docker.sock", ".colima/default/docker.sock", ".lima/default/ssh.sock"}
	var cmd strings.Builder
	for i, rel := range socks {
		sock := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		answer := fmt.Sprintf("FROM-ENGINE-%d\n", i)
		serveEach(t, l, func(net.Conn) string { return answer })
		cmd.WriteString(`perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit; print <$s>' ` + shellQuote(sock) + "; ")
	}
	cmd.WriteString("true")
	req := agentproc.Request{Command: cmd.String(), WorkDir: ws, Timeout: time.Minute}
	if got := strings.Count(runSandboxed(t, newManager(t), req).Text, "FROM-ENGINE-"); got != len(socks) {
		t.Fatalf("control: an unconfined tree reached %d sockets, want %d", got, len(socks))
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	out := runSandboxed(t, m, req).Text
	for i, rel := range socks {
		if strings.Contains(out, fmt.Sprintf("FROM-ENGINE-%d\n", i)) {
			t.Errorf("a sandboxed tree connected to ~/%s, want it out of reach", rel)
		}
	}
}

// codespacesShared is where GitHub Codespaces leaves the codespace's
// secrets for login shells: .env exports GITHUB_TOKEN (a token that can
// push to the repository, and more with the user's permissions), and
// .env-secrets holds the user's Codespaces secrets, base64 each.
const codespacesShared = "/workspaces/.codespaces/shared"

// codespacesEnv tells the unprivileged re-run that the parent made
// codespacesShared's files for it (only root can make /workspaces).
const codespacesEnv = "AGENTPROC_TEST_CODESPACES"

// makeCodespacesFiles makes codespacesShared's two files, owned by uid,
// and returns a cleanup; it skips t where /workspaces exists already (a
// real codespace, left alone).
func makeCodespacesFiles(t *testing.T, uid, gid int) func() {
	t.Helper()
	if _, err := os.Lstat("/workspaces"); err == nil {
		t.Skip("/workspaces exists (a real codespace?): left alone")
	}
	cleanup := func() { _ = os.RemoveAll("/workspaces") }
	if err := os.MkdirAll(codespacesShared, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		".env":         "export GITHUB_TOKEN=\"CSTOKEN-ghu_0123456789\"\n",
		".env-secrets": "OPENAI_API_KEY=Q1NTRUNSRVQtc2stMDEyMzQ1Njc4OQ==\nCSSECRET=Q1NTRUNSRVQ=\n",
	}
	for name, body := range files {
		p := filepath.Join(codespacesShared, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			cleanup()
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			cleanup()
			t.Fatal(err)
		}
	}
	return cleanup
}

// TestAttackCodespacesSecrets: in GitHub Codespaces, where coding agents
// commonly run, the codespace's GITHUB_TOKEN and the user's Codespaces
// secrets are in the environment (which the sandbox filters) and also in
// two files of codespacesShared, readable by the codespace's user, which
// WorkspaceSandbox did not hide: a tree printed both. The control reads
// them without the sandbox. As root the test makes /workspaces; as the
// test user (TestAttack11uUnprivileged) it reads what the parent made.
func TestAttackCodespacesSecrets(t *testing.T) {
	requireSandbox(t)
	switch {
	case os.Geteuid() == 0:
		t.Cleanup(makeCodespacesFiles(t, 0, 0))
	case os.Getenv(codespacesEnv) == "":
		t.Skip("only root makes /workspaces; TestAttack11uUnprivileged runs this as the test user")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	req := agentproc.Request{Command: "cat " + codespacesShared + "/.env " + codespacesShared + "/.env-secrets; true", WorkDir: ws, Timeout: time.Minute}
	plain := newManager(t, agentproc.WithRedaction(false))
	if ctl := runSandboxed(t, plain, req).Text; !strings.Contains(ctl, "CSTOKEN-") || !strings.Contains(ctl, "Q1NTRUNSRVQ=") {
		t.Fatalf("control without the sandbox: got %q, want both files read", ctl)
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, req).Text
	if strings.Contains(out, "CSTOKEN-") || strings.Contains(out, "Q1NTRUNSRVQ") {
		t.Errorf("got %q, want both files hidden", out)
	}
}

// TestAttack11uUnprivileged re-runs this review's root-package tests as
// the unprivileged test user, where the tree is held by Landlock and
// seccomp alone.
func TestAttack11uUnprivileged(t *testing.T) {
	tests := []string{"TestAttackKerberosTicketCache", "TestAttackWalletKeys", "TestAttackDevPlatformTokens", "TestAttackMoreAgentTokens", "TestAttackLocalVMKeys", "TestAttackAgentIDEBridgeTokens", "TestAttackCodespacesSecrets", "TestAttackEnvNamesMissed", "TestAttackHostPOSIXSharedMemory", "TestAttackToolWorkdirUnderDefaultSandbox", "TestAttackReadOnlyLinkRefusesEveryStart"}
	u, err := user.Lookup(sandboxUser)
	if err != nil {
		t.Skipf("no user %s: %v", sandboxUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	t.Cleanup(makeCodespacesFiles(t, uid, gid))
	out, err := testuser.Run(t, 2*time.Minute, []string{codespacesEnv + "=1"}, "-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, name, out)
		}
	}
}
