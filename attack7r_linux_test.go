package agentproc_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// Tests of the seventh attack review as root: docs/sandbox-threats.md,
// "Seventh attack review (root)".

// TestAttackDesktopDoors: as root the mount namespace covers a list of the
// host's doors, and a pathname socket it does not name stays reachable
// (Landlock has no right for connect(2) up to ABI 7). Among those, the
// sockets of the desktop the agent runs in, each of which acts for the
// user outside the sandbox:
//
//   - the X server's /tmp/.X11-unix/X0, which takes a local peer of the
//     display's user by its uid (GNOME's and Xwayland's
//     SI:localuser): xdotool types a command into the user's terminal;
//   - VS Code's sockets, named by VSCODE_GIT_IPC_HANDLE (the Git
//     extension's askpass: it answers with the GitHub token it holds) and
//     VSCODE_IPC_HOOK_CLI (the `code` command: open a URL in the user's
//     browser, install an extension, which runs unconfined), in the
//     runtime dir or the temp dir; an agent run in VS Code's terminal has
//     both, and a tree finds them by listing the directory;
//   - Chromium's and Chrome's SingletonSocket in /tmp, through which the
//     running browser opens a URL the tree names, with the user's cookies
//     and network (data out of a NetworkNone tree).
//   - the Wayland display (wlroots compositors give any client screen
//     capture and a virtual keyboard) and the sound server's sockets
//     (PipeWire, PulseAudio: the microphone).
//
// Each is now covered (hostDoors): the fixed paths whether they exist or
// not, the named ones as the Manager's policy is built. The test makes a
// listener at each (paths this host has are left alone); the control
// reaches it unconfined.
func TestAttackDesktopDoors(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	n := strconv.Itoa(os.Getpid())
	runtime := "/run/user/" + strconv.Itoa(os.Getuid())
	socks := map[string][]string{ // socket: the directories made for it
		"/tmp/.X11-unix/X" + strconv.Itoa(100+os.Getpid()%900):  {"/tmp/.X11-unix"},
		filepath.Join(os.TempDir(), "vscode-ipc-"+n+".sock"):    nil,
		filepath.Join(runtime, "vscode-git-"+n+".sock"):         {"/run/user", runtime},
		"/tmp/.org.chromium.Chromium." + n + "/SingletonSocket": {"/tmp/.org.chromium.Chromium." + n},
		"/tmp/.com.google.Chrome." + n + "/SingletonSocket":     {"/tmp/.com.google.Chrome." + n},
	}
	for _, p := range []string{"wayland-7" + n[len(n)-1:], "pipewire-0-7r" + n, "pulse/native"} {
		socks[filepath.Join(runtime, p)] = []string{"/run/user", runtime, filepath.Dir(filepath.Join(runtime, p))}
	}
	named := filepath.Join(t.TempDir(), "hook.sock")
	t.Setenv("VSCODE_IPC_HOOK_CLI", named)
	socks[named] = nil
	requireDoorsShut(t, ws, socks)
}

// TestAttackRootAdminSockets: more root daemons whose Unix socket takes
// any uid-0 peer for their administrator, outside the door list: a root
// tree reached each. fail2ban's (`fail2ban-client set <jail> action <a>
// actionban <command>`, then `banip`: the command runs as root,
// unconfined), MariaDB's and Ubuntu's MySQL's (root logs in by its peer
// uid, unix_socket/auth_socket: every database, and files written as the
// server), chrony's (`settime`, which seccomp refuses the tree directly,
// and `add server <name>`: a name resolved and packets sent for a
// NetworkNone tree), Open vSwitch's database (the host's switching),
// Proxmox's QEMU monitors (`human-monitor-command` on every VM),
// supervisord's, Multipass's (a VM with the host's directories mounted),
// and the services any local user may use that carry data off the host
// for a NetworkNone tree: avahi (a service published on the LAN under a
// name the tree chooses), CUPS (a job sent to a network printer), pcscd
// (the user's smart card). Each is now covered (hostDoors).
func TestAttackRootAdminSockets(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	socks := map[string][]string{
		"/run/fail2ban/fail2ban.sock":  {"/run/fail2ban"},
		"/run/mysqld/mysqld.sock":      {"/run/mysqld"},
		"/run/chrony/chronyd.sock":     {"/run/chrony"},
		"/run/openvswitch/db.sock":     {"/run/openvswitch"},
		"/run/qemu-server/100.qmp":     {"/run/qemu-server"},
		"/run/supervisor.sock":         nil,
		"/run/multipass_socket":        nil,
		"/run/avahi-daemon/socket":     {"/run/avahi-daemon"},
		"/run/cups/cups.sock":          {"/run/cups"},
		"/run/pcscd/pcscd.comm":        {"/run/pcscd"},
		"/var/run/fail2ban/x.sock":     {"/var/run/fail2ban"},
		"/var/run/mysqld/mysqlx.sock":  {"/var/run/mysqld"},
		"/run/qemu-server/101.serial0": {"/run/qemu-server"},
	}
	requireDoorsShut(t, ws, socks)
}

// requireDoorsShut listens on each socket of socks (making the
// directories it names where missing, removed at cleanup; a socket this
// host has is left alone), all before the sandboxed Manager's first Start,
// and checks that an unconfined tree reaches each and a tree of
// WorkspaceSandbox(ws) none.
func requireDoorsShut(t *testing.T, ws string, socks map[string][]string) {
	t.Helper()
	made := makeDoors(t, socks, 0o755)
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	probeDoors(t, ws, made, newManager(t), m)
}

// makeDoors listens on each socket of socks that this host lacks, after
// making the directories it names where missing (with mode), and returns
// the sockets made; all are removed at cleanup.
func makeDoors(t *testing.T, socks map[string][]string, mode os.FileMode) []string {
	t.Helper()
	var made []string
	for p, dirs := range socks {
		if _, err := os.Lstat(p); err == nil {
			continue // this host's own: left alone
		}
		listenDoor(t, p, dirs, mode)
		made = append(made, p)
	}
	return made
}

// probeDoors checks that a tree of plain (unconfined: the control)
// reaches each socket of made and that a tree of each of sandboxed
// reaches none. One tree of each tries every socket (doorprobe): a Start
// of the race-built test binary per socket and Manager made the door tests
// take 57.5 s in a timed run (2.2 to 3.4 s each now).
func probeDoors(t *testing.T, ws string, made []string, plain *agentproc.Manager, sandboxed ...*agentproc.Manager) {
	t.Helper()
	if len(made) == 0 {
		return
	}
	req := helperRequest(t, "doorprobe")
	req.Env[doorProbeEnv] = strings.Join(made, "\n")
	req.WorkDir = ws
	reached := runSandboxed(t, plain, req).Text
	for _, p := range made {
		if !strings.Contains(reached, "reached "+p+"\n") {
			t.Fatalf("control: connect %s without the sandbox: got %q, want it reached", p, reached)
		}
	}
	for i, m := range sandboxed {
		denied := runSandboxed(t, m, req).Text
		for _, p := range made {
			if strings.Contains(denied, "reached "+p+"\n") || !strings.Contains(denied, "denied "+p+": ") {
				t.Errorf("sandboxed Manager %d: connect %s: got %q, want it refused", i, p, denied)
			}
		}
	}
}

// doorProbeEnv tells the "doorprobe" helper the sockets to try, one a
// line.
const doorProbeEnv = "AGENTPROC_TEST_DOORS"

func init() {
	// doorprobe connects to each socket doorProbeEnv names and prints
	// "reached PATH" or "denied PATH: ERR" for each.
	agentproc.RegisterHelper("doorprobe", helperDoorProbe, false)
}

func helperDoorProbe() int {
	for p := range strings.SplitSeq(os.Getenv(doorProbeEnv), "\n") {
		if err := fsProbe("unix", p); err != nil {
			fmt.Printf("denied %s: %v\n", p, err)
			continue
		}
		fmt.Printf("reached %s\n", p)
	}
	return 0
}

// TestAttackTracedShellLeftZombie: a shell that asks its parent, the host,
// to trace it (PTRACE_TRACEME, which seccomp allows: gdb's children need
// it) and then takes a signal stops under that trace, and os/exec's wait
// (waitid with WEXITED, which reports a traced child's stops as well)
// returned at the stop: the Manager published the command as exited (code
// -1) while it ran, killed it with the leftovers, and never reaped it, a
// zombie child of the host per Start, holding a PID (and, for a user other
// than root, a slot of RLIMIT_NPROC) until the host exits: the class of the
// third review's CLONE_PARENT zombies, one per command. Now the wait is
// finished for a stopped shell: it is killed and reaped, and reported as
// killed. Run without the sandbox too: the host's wait is the same.
func TestAttackTracedShellLeftZombie(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	compileC(t, ws, "traceme", `#include <sys/ptrace.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
	if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) { perror("traceme"); return 3; }
	printf("traced\n"); fflush(stdout);
	raise(SIGUSR1);
	for (;;) { printf("still running\n"); fflush(stdout); sleep(1); }
}`)
	for _, sb := range []*agentproc.Sandbox{nil, agentproc.WorkspaceSandbox(ws)} {
		m := newManager(t, agentproc.WithRedaction(false))
		p := mustStart(t, m, agentproc.Request{WorkDir: ws, Command: "exec ./traceme", Sandbox: sb})
		mustWait(t, p)
		info := p.Info()
		if !strings.Contains(p.Output().Text, "traced") {
			t.Fatalf("sandbox %v: output %q, want the shell traced", sb != nil, p.Output().Text)
		}
		// Sandboxed, the host thread that forked the shell exits right
		// after the exec stop's detach; where it is still there when the
		// shell asks, it is the tracer, and its exit detaches the shell,
		// which then dies of its own SIGUSR1 (no zombie either way: the
		// check below). Seen 2 in 30 runs (eighth attack review).
		if info.ExitSignal != "SIGKILL" && (sb == nil || info.ExitSignal != "SIGUSR1") {
			t.Errorf("sandbox %v: exit code %d, signal %q, want SIGKILL", sb != nil, *info.ExitCode, info.ExitSignal)
		}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(info.PID) + "/stat"); err == nil {
			t.Errorf("sandbox %v: after Wait the shell is still there: %s, want it reaped", sb != nil, b)
		}
	}
}

// TestAttackSecretsOutsideList: files the common tools write by default
// that hold a credential, outside WorkspaceSandbox's list: a tree read
// each. The X server's cookie (~/.Xauthority: with it any peer that
// reaches the display, TCP included, types into the user's terminal),
// Docker's TLS client key (its default cert path), minikube's and Talos's
// cluster admin keys (~/.kube was hidden, these not), the MinIO client's
// keys, the model API keys of the llm command, the Vercel, Supabase,
// Railway, Doppler, CircleCI, Scaleway and Linode command lines' tokens,
// Ollama's signing key, sbt's and Ivy's publishing passwords, and the
// shell's and database clients' histories (`export GITHUB_TOKEN=…`,
// `mysql -p…`, redis-cli's `AUTH`, psql's `\password`). They are in the
// credential list now. The control reads each unconfined.
func TestAttackSecretsOutsideList(t *testing.T) {
	requireSandbox(t)
	home, ws := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	files := []string{
		".Xauthority", ".docker/key.pem", ".minikube/profiles/minikube/client.key", ".talos/config",
		".mc/config.json", ".config/io.datasette.llm/keys.json", ".local/share/com.vercel.cli/auth.json",
		".supabase/access-token", ".railway/config.json", ".doppler/.doppler.yaml", ".circleci/cli.yml",
		".config/scw/config.yaml", ".config/linode-cli", ".ollama/id_ed25519", ".sbt/.credentials",
		".ivy2/.credentials", ".bash_history", ".zsh_history", ".psql_history", ".mysql_history",
		".rediscli_history",
	}
	requireHomeFilesHidden(t, home, ws, files, "SECRET-OF-")
}

// TestAttackMountedSecrets: the secrets a container platform mounts into
// the container an agent runs in were readable to every tree: Kubernetes'
// service account token (/var/run/secrets/kubernetes.io/serviceaccount/token:
// the API server as the pod; EKS's and Azure's workload identity tokens sit
// beside it and are exchanged for cloud credentials) and Docker Compose's and
// Swarm's secrets (/run/secrets/<name>). They are world-readable (0644 or
// 0444), so neither the uid nor the credential list under the home kept
// them from the tree. /run/secrets and /var/run/secrets are in the system
// list now. The control reads each unconfined.
func TestAttackMountedSecrets(t *testing.T) {
	requireSandbox(t)
	if os.Getuid() != 0 {
		t.Skip("makes /run/secrets: root only")
	}
	ws := t.TempDir()
	dir := "/run/secrets"
	if _, err := os.Lstat(dir); err == nil {
		t.Skipf("%s exists here: left alone", dir)
	}
	sa := filepath.Join(dir, "kubernetes.io", "serviceaccount")
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	files := map[string]string{filepath.Join(sa, "token"): "eyJ-SA-TOKEN", filepath.Join(dir, "db_password"): "COMPOSE-SECRET"}
	cmd := "for f in"
	for f, v := range files {
		if err := os.WriteFile(f, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd += " " + shellQuote(f)
	}
	cmd += `; do cat "$f"; done; true`
	m := newManager(t, agentproc.WithRedaction(false))
	ctl := runSandboxed(t, m, agentproc.Request{Command: cmd, WorkDir: ws})
	out := runSandboxed(t, m, agentproc.Request{Command: cmd, WorkDir: ws, Sandbox: agentproc.WorkspaceSandbox(ws)})
	for f, v := range files {
		if !strings.Contains(ctl.Text, v) {
			t.Fatalf("control: %s not read unconfined (output %q)", f, ctl.Text)
		}
		if strings.Contains(out.Text, v) {
			t.Errorf("%s was read inside WorkspaceSandbox (output %q), want it hidden", f, out.Text)
		}
	}
}

// TestAttackTerminalDoors: tmux's and screen's sockets were doors, but
// not those of the other terminals and editors that run or type what a
// client asks: zellij (`zellij action write-chars`), WezTerm (`wezterm cli
// send-text`), Alacritty (`alacritty msg create-window -e cmd`), kitty's
// remote control (`kitty @ launch`, where KITTY_LISTEN_ON names it), Emacs's
// server (`emacsclient --eval '(shell-command …)'`) and Neovim's
// (`nvim --server … --remote-send ':!cmd'`, $NVIM in its terminal): each
// runs a command of the tree's as root, unconfined. Each is now covered
// (desktopDoors), by its default place and by its variable.
func TestAttackTerminalDoors(t *testing.T) {
	requireRootSandbox(t)
	ws, tmp := t.TempDir(), os.TempDir()
	uid := strconv.Itoa(os.Getuid())
	runtime := "/run/user/" + uid
	n := strconv.Itoa(os.Getpid())
	socks := map[string][]string{
		filepath.Join(tmp, "zellij-"+uid, "s"+n):          {filepath.Join(tmp, "zellij-"+uid)},
		filepath.Join(tmp, "emacs"+uid, "server"):         {filepath.Join(tmp, "emacs"+uid)},
		filepath.Join(tmp, "nvim.x"+n, "0", "nvim.1.0"):   {filepath.Join(tmp, "nvim.x"+n), filepath.Join(tmp, "nvim.x"+n, "0")},
		filepath.Join(runtime, "wezterm", "gui-sock-"+n):  {"/run/user", runtime, filepath.Join(runtime, "wezterm")},
		filepath.Join(runtime, "Alacritty-:0-"+n+".sock"): {"/run/user", runtime},
		filepath.Join(runtime, "nvim."+n+".0"):            {"/run/user", runtime},
		filepath.Join(runtime, "emacs", "server"):         {"/run/user", runtime, filepath.Join(runtime, "emacs")},
	}
	kitty, nvim := filepath.Join(t.TempDir(), "kitty.sock"), filepath.Join(t.TempDir(), "nvim.sock")
	t.Setenv("KITTY_LISTEN_ON", "unix:"+kitty)
	t.Setenv("NVIM", nvim)
	socks[kitty], socks[nvim] = nil, nil
	requireDoorsShut(t, ws, socks)
}

// TestAttackHostNetworkThroughProcNet: a NetworkNone tree as root is in an
// empty network namespace and refused AF_NETLINK, so that the host's
// sockets and routes are not its business (docs/sandbox-threats.md, "Reviewed
// and left allowed"); but /proc/PID/net of any host process, which takes no
// ptrace check, shows the host's namespace: its listening ports, its
// connections' peers, its routes, neighbours and every pathname socket's
// path. The test listens on the host's loopback and looks for the port in
// /proc/$PPID/net/tcp from the tree; the control is the tree's own
// /proc/self/net/tcp, which does not list it.
func TestAttackHostNetworkThroughProcNet(t *testing.T) {
	t.Skip("escape found by attack review, not fixed: /proc/PID/net shows the host's network namespace to a NetworkNone root tree; a PID namespace per tree (its own /proc) would close it")
	requireRootSandbox(t)
	ws := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strings.ToUpper(strconv.FormatInt(int64(l.Addr().(*net.TCPAddr).Port)+0x10000, 16)[1:])
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws,
		Command: "grep -c ':" + port + " ' /proc/self/net/tcp; grep -c ':" + port + " ' /proc/$PPID/net/tcp; true"})
	if lines := strings.Fields(out.Text); len(lines) != 2 || lines[0] != "0" {
		t.Fatalf("control: the tree's own namespace: output %q, want 0 then the host's count", out.Text)
	} else if lines[1] != "0" {
		t.Errorf("the tree found the host's listener on port %d in /proc/$PPID/net/tcp (%s lines), want the host's network hidden", l.Addr().(*net.TCPAddr).Port, lines[1])
	}
}

// TestAttackOtherSSHAgents: the door list held the Manager's own
// SSH_AUTH_SOCK, not the other ssh agents of its user in /tmp: sshd makes
// /tmp/ssh-XXXXXXXXXX/agent.PID for every login that forwards an agent
// (an administrator's `ssh -A root@server`: their own keys), ssh-agent
// started by hand does the same, and a ControlMaster socket at the
// common `ControlPath /tmp/ssh-%r@%h:%p` runs commands on the remote host
// over the user's authenticated connection. A root tree, uid 0, owns
// root's and connects. They are covered now (`ssh-*` in the temp dir, as
// the policy is built). The control reaches each unconfined.
func TestAttackOtherSSHAgents(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	n := strconv.Itoa(os.Getpid())
	agentDir := "/tmp/ssh-7r" + n
	requireDoorsShut(t, ws, map[string][]string{
		filepath.Join(agentDir, "agent."+n): {agentDir},
		"/tmp/ssh-root@prod-7r" + n + ":22": nil,
	})
}

// TestAttackKeyringAndAgentSockets: the runtime dir's doors named the
// session bus, systemd, gnupg, Docker, Podman and tmux, not the other
// agents a desktop session keeps there: gnome-keyring's ssh agent and
// control socket (keyring/ssh, keyring/control) and GNOME's newer gcr/ssh,
// systemd's user ssh-agent (ssh-agent.socket), p11-kit's forwarded
// smart cards (p11-kit/pkcs11), GVfs (gvfsd: the user's mounted shares,
// with their saved passwords); nor the ssh agents that password managers
// keep in the home directory (1Password's ~/.1password/agent.sock,
// Bitwarden's ~/.bitwarden-ssh-agent.sock). A root tree signed with root's
// keys through each. Covered now (hostDoors, the credential list).
func TestAttackKeyringAndAgentSockets(t *testing.T) {
	requireRootSandbox(t)
	ws, home := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	runtime := "/run/user/" + strconv.Itoa(os.Getuid())
	socks := map[string][]string{
		filepath.Join(home, ".1password", "agent.sock"):  {filepath.Join(home, ".1password")},
		filepath.Join(home, ".bitwarden-ssh-agent.sock"): nil,
	}
	for _, p := range []string{"keyring/ssh", "keyring/control", "gcr/ssh", "ssh-agent.socket", "p11-kit/pkcs11", "gvfsd/socket-7r"} {
		socks[filepath.Join(runtime, p)] = []string{"/run/user", runtime, filepath.Dir(filepath.Join(runtime, p))}
	}
	requireDoorsShut(t, ws, socks)
}
