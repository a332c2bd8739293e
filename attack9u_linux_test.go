package agentproc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// Tests of the ninth attack review (unprivileged and the surfaces):
// docs/sandbox-threats.md, "Ninth attack review (unprivileged and the
// surfaces)".

// TestAttackHiddenDirLinksOut: a dotfile manager (GNU stow into a
// directory that exists already, as ~/.ssh does once ssh has written
// known_hosts; chezmoi's and yadm's link modes) leaves the hidden
// directory real and puts links to the files in it: ~/.ssh/id_ed25519 ->
// ../dotfiles/ssh/id_ed25519. WorkspaceSandbox hid the directory and
// every path below it, but the files themselves live at the links'
// targets, which the policy never named: `cat ~/.ssh/id_ed25519` was
// refused and `cat ~/dotfiles/ssh/id_ed25519` printed the key (the target
// is found by readlink, which Landlock does not check, or by guessing the
// usual place). The same for a link to a directory (gpg's
// private-keys-v1.d). The control: without the sandbox both paths read
// the key, and with it the path through the hidden directory is refused.
// Runs as root and, through TestAttack9uUnprivileged, not.
func TestAttackHiddenDirLinksOut(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	dot := filepath.Join(home, "dotfiles")
	for _, d := range []string{ws, filepath.Join(home, ".ssh"), filepath.Join(home, ".gnupg"),
		filepath.Join(dot, "ssh"), filepath.Join(dot, "gnupg", "private-keys-v1.d")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(dot, "ssh", "id_ed25519"):                      "LINKED-SSH-KEY",
		filepath.Join(dot, "gnupg", "private-keys-v1.d", "ABCD.key"): "LINKED-GPG-KEY",
		filepath.Join(home, ".ssh", "known_hosts"):                   "example.com ssh-ed25519 AAAA",
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{ // link -> target, relative as stow makes them
		filepath.Join(home, ".ssh", "id_ed25519"):          "../dotfiles/ssh/id_ed25519",
		filepath.Join(home, ".gnupg", "private-keys-v1.d"): "../dotfiles/gnupg/private-keys-v1.d",
	}
	for l, target := range links {
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
	}
	viaLink := []string{filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(home, ".gnupg", "private-keys-v1.d", "ABCD.key")}
	atTarget := []string{filepath.Join(dot, "ssh", "id_ed25519"), filepath.Join(dot, "gnupg", "private-keys-v1.d", "ABCD.key")}
	cat := func(paths []string) string {
		var b strings.Builder
		for _, p := range paths {
			b.WriteString("cat " + shellQuote(p) + "; ")
		}
		return b.String() + "true"
	}
	plain := newManager(t, agentproc.WithRedaction(false))
	ctl := runSandboxed(t, plain, agentproc.Request{Command: cat(append(slices.Clone(viaLink), atTarget...)), WorkDir: ws, Timeout: time.Minute})
	if strings.Count(ctl.Text, "LINKED-SSH-KEY") != 2 || strings.Count(ctl.Text, "LINKED-GPG-KEY") != 2 {
		t.Fatalf("control without the sandbox: got %q, want each key read twice", ctl.Text)
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	through := runSandboxed(t, m, agentproc.Request{Command: cat(viaLink), WorkDir: ws, Timeout: time.Minute})
	if strings.Contains(through.Text, "LINKED-") {
		t.Fatalf("control: through the hidden directories got %q, want both refused", through.Text)
	}
	out := runSandboxed(t, m, agentproc.Request{Command: cat(atTarget), WorkDir: ws, Timeout: time.Minute})
	if strings.Contains(out.Text, "LINKED-") {
		t.Errorf("at the links' targets: got %q, want both refused (the files a hidden directory links to are hidden too)", out.Text)
	}
}

// TestAttackHiddenDirLinkIntoWorkspace: where a link in a hidden directory
// points into the writable work dir, the file cannot be hidden there; the
// Start is refused with an error naming the link, as for a hidden path
// inside Write, rather than run with the file readable.
func TestAttackHiddenDirLinkIntoWorkspace(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(filepath.Join(home, ".aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "creds"), []byte("LINKED-AWS\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(home, ".aws", "credentials")
	if err := os.Symlink("../project/creds", link); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	p, err := m.Start(t.Context(), agentproc.Request{Command: "cat " + shellQuote(link), WorkDir: ws})
	if err == nil {
		mustWait(t, p)
		t.Fatalf("Start: got a process (output %q), want ErrInvalidRequest naming the link", p.Output().Text)
	}
	if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(err.Error(), link) {
		t.Errorf("Start: got %v, want ErrInvalidRequest naming %s", err, link)
	}
}

// agentConfigFiles are where coding agents and their editors keep the
// tokens of the MCP servers they start (an env block or an Authorization
// header per server: `claude mcp add github -e GITHUB_PERSONAL_ACCESS_TOKEN=…`
// writes ~/.claude.json), model API keys, and the transcripts and prompt
// histories of every session, which hold whatever secrets a tool printed
// or a user pasted there. Relative to the home directory.
var agentConfigFiles = []string{
	".claude.json", ".claude.json.backup", ".claude/backups/.claude.json.backup.1",
	".claude/settings.json", ".claude/settings.local.json", ".claude/history.jsonl",
	".claude/projects/-home-u-other/0b6c.jsonl",
	".cursor/mcp.json", ".codeium/windsurf/mcp_config.json", ".config/Claude/claude_desktop_config.json",
	".gemini/settings.json", ".codex/config.toml", ".codex/history.jsonl", ".codex/sessions/2026/11/27/rollout.jsonl",
	".local/share/opencode/auth.json", ".aider.conf.yml", ".continue/config.yaml", ".continue/config.json",
	".config/Code/User/mcp.json",
	// The editors' extension state (state.vscdb): Cursor keeps its access
	// and refresh tokens there in the clear, VS Code its extensions'
	// secrets where no keyring runs (the "basic" store, a fixed key), also
	// under a remote or WSL VS Code server.
	".config/Cursor/User/globalStorage/state.vscdb", ".config/Code/User/globalStorage/state.vscdb",
	".config/Windsurf/User/globalStorage/state.vscdb", ".vscode-server/data/User/globalStorage/state.vscdb",
	".cursor-server/data/User/globalStorage/state.vscdb",
	// Histories of shells and interpreters the seventh review's list
	// (bash, zsh, psql, mysql, redis-cli) left out: fish's, atuin's
	// database and sync key, zsh's other usual names (zsh-newuser-install's
	// ~/.histfile, prezto's ~/.zhistory), Python's, Node's, SQLite's, the
	// MongoDB shells' and irb's.
	".local/share/fish/fish_history", ".local/share/atuin/history.db", ".local/share/atuin/key",
	".histfile", ".zhistory", ".python_history", ".node_repl_history", ".sqlite_history",
	".dbshell", ".mongosh/mongosh_repl_history", ".irb_history",
}

// TestAttackAgentConfigSecrets: WorkspaceSandbox hid the coding agents'
// credential files (~/.claude/.credentials.json, ~/.codex/auth.json) but not
// the files beside them that hold other tokens: ~/.claude.json keeps the
// env of every MCP server added with `claude mcp add -e` (a GitHub token,
// a database URL) and, for an API-key login, primaryApiKey; Cursor's,
// Windsurf's, Claude Desktop's, Gemini's and Codex's MCP settings do the
// same; opencode, aider and Continue keep model API keys; and the
// transcripts and prompt histories (~/.claude/projects, ~/.codex/sessions)
// hold what every earlier session printed or was given, other projects'
// included. A tree (the model's own command, under agentproc mcp inside
// that very agent) read them all. The control reads them without the
// sandbox. Runs as root and, through TestAttack9uUnprivileged, not.
func TestAttackAgentConfigSecrets(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	var cmd strings.Builder
	for i, rel := range agentConfigFiles {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("AGENTCFG-%d\n", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd.WriteString("cat " + shellQuote(p) + "; ")
	}
	cmd.WriteString("true")
	req := agentproc.Request{Command: cmd.String(), WorkDir: ws, Timeout: time.Minute}
	plain := newManager(t, agentproc.WithRedaction(false))
	if got, want := strings.Count(runSandboxed(t, plain, req).Text, "AGENTCFG-"), len(agentConfigFiles); got != want {
		t.Fatalf("control without the sandbox: got %d files read, want %d", got, want)
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, req).Text
	for i, rel := range agentConfigFiles {
		if strings.Contains(out, fmt.Sprintf("AGENTCFG-%d\n", i)) {
			t.Errorf("~/%s: got it read, want it hidden", rel)
		}
	}
}

// TestAttackWindowsHomeCredentials: under WSL, the Windows users' homes are
// mounted at /mnt/c/Users/NAME, owned by and readable to the Linux user,
// and hold the same user's credentials (~/.aws, ~/.ssh, ~/.kube, gh's and
// gcloud's under AppData). WorkspaceSandbox hid the Linux home's only: a
// tree read the Windows side's. The test makes such a tree under /mnt
// (root: /mnt is root's); the control reads it without the sandbox.
func TestAttackWindowsHomeCredentials(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a Windows drive's tree under /mnt")
	}
	drive, err := os.MkdirTemp("/mnt", "agentproc-wsl-")
	if err != nil {
		t.Skipf("cannot make a drive under /mnt: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(drive) })
	home := filepath.Join(drive, "Users", "alice")
	files := []string{".aws/credentials", ".ssh/id_ed25519", ".kube/config", "AppData/Roaming/GitHub CLI/hosts.yml",
		"AppData/Roaming/gcloud/credentials.db", ".claude/.credentials.json"}
	var cmd strings.Builder
	for i, rel := range files {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("WINCRED-%d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd.WriteString("cat " + shellQuote(p) + "; ")
	}
	cmd.WriteString("true")
	ws := t.TempDir()
	req := agentproc.Request{Command: cmd.String(), WorkDir: ws, Timeout: time.Minute}
	plain := newManager(t, agentproc.WithRedaction(false))
	if got := strings.Count(runSandboxed(t, plain, req).Text, "WINCRED-"); got != len(files) {
		t.Fatalf("control without the sandbox: got %d files read, want %d", got, len(files))
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, req).Text
	for i, rel := range files {
		if strings.Contains(out, fmt.Sprintf("WINCRED-%d\n", i)) {
			t.Errorf("%s: got it read, want it hidden", filepath.Join(home, rel))
		}
	}
}

// moreCredentialFiles are registry and version control credentials the
// list missed, relative to the home directory: Helm's registry logins,
// Subversion's cached passwords, s3fs's keys, WakaTime's API key. (Not
// pip's, conda's, Bundler's or Helm's repository settings, which may hold
// an index's password but which builds need, as ~/.m2/settings.xml.)
var moreCredentialFiles = []string{
	".config/helm/registry/config.json", ".subversion/auth/svn.simple/5f0c", ".passwd-s3fs", ".wakatime.cfg",
	// ML and platform tokens: Kaggle's, Modal's, Codeium's, Neon's, Expo's,
	// go-jira's.
	".kaggle/kaggle.json", ".modal.toml", ".codeium/config.json", ".config/neonctl/credentials.json",
	".expo/state.json", ".jira.d/config.yml",
	// Clouds' command lines: IBM's, Alibaba's, Tencent's, OpenStack's
	// clouds.yaml and secure.yaml, OVH's, Vultr's.
	".bluemix/config.json", ".aliyun/config.json", ".tccli/default.credential",
	".config/openstack/clouds.yaml", ".config/openstack/secure.yaml", ".ovh.conf", ".vultr-cli.yaml",
}

// TestAttackMoreCredentialFiles: the files above, and Podman's, Buildah's
// and skopeo's registry logins, which `podman login` writes to
// $XDG_RUNTIME_DIR/containers/auth.json (not the listed
// ~/.config/containers/auth.json), were read by a tree. The control reads
// them without the sandbox. Runs as root and, through
// TestAttack9uUnprivileged, not.
func TestAttackMoreCredentialFiles(t *testing.T) {
	requireSandbox(t)
	home, runtime := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, rel := range moreCredentialFiles {
		paths = append(paths, filepath.Join(home, rel))
	}
	paths = append(paths, filepath.Join(runtime, "containers", "auth.json"))
	var cmd strings.Builder
	for i, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("MORECRED-%d\n", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd.WriteString("cat " + shellQuote(p) + "; ")
	}
	cmd.WriteString("true")
	req := agentproc.Request{Command: cmd.String(), WorkDir: ws, Timeout: time.Minute}
	plain := newManager(t, agentproc.WithRedaction(false))
	if got := strings.Count(runSandboxed(t, plain, req).Text, "MORECRED-"); got != len(paths) {
		t.Fatalf("control without the sandbox: got %d files read, want %d", got, len(paths))
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, req).Text
	for i, p := range paths {
		if strings.Contains(out, fmt.Sprintf("MORECRED-%d\n", i)) {
			t.Errorf("%s: got it read, want it hidden", p)
		}
	}
}

// leaseHolder takes a write lease on the file it is given, says so, and
// holds it, ignoring the SIGIO that asks it to give the lease up.
const leaseHolder = `#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
	signal(SIGIO, SIG_IGN);
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) { perror("open"); return 1; }
	if (fcntl(fd, F_SETLEASE, F_WRLCK) != 0) { perror("lease"); return 1; }
	printf("lease held\n");
	fflush(stdout);
	for (;;) pause();
}
`

// TestAttackLeaseStallsOpen: fcntl(F_SETLEASE) needs only to own the file,
// and without root a tree owns every file of its user (as root, every file
// it made). A write lease makes every other process's open(2) of the file
// wait until the holder gives it up or the lease-break time passes (45 s
// by default, /proc/sys/fs/lease-break-time), and the tree can take it
// again at once: the agent's own reads and edits of the workspace, the
// user's editor and git stalled on each open of the files the tree chose.
// The control: the same program without the sandbox stalls an open; with
// it the lease is refused and the open returns at once. The test's own
// open stands for the agent's.
func TestAttackLeaseStallsOpen(t *testing.T) {
	requireSandbox(t)
	if b, err := os.ReadFile("/proc/sys/fs/leases-enable"); err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Skip("file leases are off here")
	}
	bin := t.TempDir()
	compileC(t, bin, "lease", leaseHolder)
	for _, sandboxed := range []bool{false, true} {
		ws := t.TempDir()
		file := filepath.Join(ws, "main.go")
		if err := os.WriteFile(file, []byte("package main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var opts []agentproc.Option
		if sandboxed {
			opts = append(opts, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
		}
		m := newManager(t, opts...)
		p := mustStart(t, m, agentproc.Request{Command: shellQuote(filepath.Join(bin, "lease")) + " " + shellQuote(file), WorkDir: ws, Timeout: time.Minute})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		line, err := p.WaitMatch(ctx, regexp.MustCompile(`lease`), agentproc.Plain)
		cancel()
		if err != nil {
			t.Fatalf("sandboxed %v: no word from the lease holder: %v (output %q)", sandboxed, err, p.Output().Text)
		}
		// The open waits in the kernel; a goroutine bounds how long the
		// test waits for it (the holder's exit ends the lease).
		opened := make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			if f, err := os.Open(file); err == nil {
				f.Close()
			}
			opened <- time.Since(start)
		}()
		// An open that no lease holds returns within a millisecond: the
		// control's 500 ms shows the hold, and the sandboxed case gets
		// 2 s, which it needs only where it fails.
		bound := 2 * time.Second
		if !sandboxed {
			bound = 500 * time.Millisecond
		}
		var took time.Duration
		select {
		case took = <-opened:
		case <-time.After(bound):
			took = -1
		}
		stopCtx, stopCancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, _ = p.Stop(stopCtx)
		stopCancel()
		if took < 0 {
			<-opened // the holder is gone: the open returns
		}
		switch {
		case !sandboxed && took >= 0:
			t.Fatalf("control without the sandbox: the open returned in %v (holder said %q), want it held by the lease past %v", took, line, bound)
		case sandboxed && took < 0:
			t.Errorf("sandboxed: the open waited past 2 s on the tree's lease (holder said %q), want the lease refused", line)
		}
	}
}

// nester makes a chain of argv[2] nested directories named d in argv[1],
// holding two descriptors at most, and prints the dir it started from.
const nester = `#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
	int n = atoi(argv[2]);
	int fd = open(argv[1], O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < n; i++) {
		if (mkdirat(fd, "d", 0700) != 0) { perror("mkdirat"); return 1; }
		int next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
		if (next < 0) { perror("openat"); return 1; }
		close(fd);
		fd = next;
	}
	printf("nested %d in %s\n", n, argv[1]);
	return 0;
}
`

// TestAttackDeepTempDirOutlivesTree: a tree nests directories in its
// private temp dir deeper than the host's descriptor limit (RLIMIT_NOFILE,
// 20,000 here; the test lowers it to 1,024 so that 1,100 levels do). The
// host removed the dir with os.RemoveAll, which holds a descriptor for
// every level it descends: it ran out of descriptors (every other open,
// accept, pipe and Start of the host failing meanwhile), gave up with
// EMFILE, and the tree's files stayed in the temp parent after the tree
// ended and after Close. The control: os.RemoveAll of the same chain made
// by the test fails under the same limit.
func TestAttackDeepTempDirOutlivesTree(t *testing.T) {
	requireSandbox(t)
	bin := t.TempDir()
	compileC(t, bin, "nester", nester)
	const limit, depth = 1024, 1100
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Max < limit {
		t.Skipf("hard descriptor limit %d is below %d", old.Max, limit)
	}
	lowered := old
	lowered.Cur = limit
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
	control := t.TempDir()
	if out, err := exec.Command(filepath.Join(bin, "nester"), control, strconv.Itoa(depth)).CombinedOutput(); err != nil {
		t.Fatalf("control: nester: %v %s", err, out)
	}
	if err := os.RemoveAll(control); err == nil {
		t.Fatalf("control: os.RemoveAll of %d levels under a limit of %d: got no error, want EMFILE", depth, limit)
	}
	ws := t.TempDir()
	keep := filepath.Join(ws, "keep")
	if err := os.WriteFile(keep, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := agentproc.New(agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	// Links out of the temp dir, near the top and deep down, are removed,
	// never followed: the workspace file stays.
	cmd := shellQuote(filepath.Join(bin, "nester")) + ` "$TMPDIR" ` + strconv.Itoa(depth) + ` && ln -s "$PWD" "$TMPDIR/d/ws" && ` +
		`cd "$TMPDIR" && for i in $(seq 40); do cd d; done && ln -s ` + shellQuote(keep) + ` link && ln -s ` + shellQuote(ws) + ` wsdir`
	p := mustStart(t, m, agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute})
	mustWait(t, p)
	out := p.Output().Text
	tmp := strings.TrimSpace(strings.TrimPrefix(out, fmt.Sprintf("nested %d in ", depth)))
	if !strings.HasPrefix(out, "nested ") || !filepath.IsAbs(tmp) {
		m.Close()
		t.Fatalf("tree: got %q, want the nesting done", out)
	}
	m.Close()
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("after Close: the workspace file: got %v, want it kept (a link in the temp dir followed)", err)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close: the tree's temp dir %s: got %v, want it removed", tmp, err)
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
		_ = os.RemoveAll(tmp)
	}
}

// TestAttack9uUnprivileged re-runs this review's root-package tests as the
// unprivileged test user, where the tree is held by Landlock and seccomp
// alone.
func TestAttack9uUnprivileged(t *testing.T) {
	tests := []string{"TestAttackHiddenDirLinksOut", "TestAttackHiddenDirLinkIntoWorkspace", "TestAttackAgentConfigSecrets", "TestAttackMoreCredentialFiles", "TestAttackLeaseStallsOpen", "TestAttackDeepTempDirOutlivesTree"}
	rerunAsSandboxUser(t, tests, false)
}
