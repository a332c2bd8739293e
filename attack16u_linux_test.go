package agentproc_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testuser"
)

// The sixteenth attack review's tests, unprivileged and the surfaces
// (docs/sandbox-threats.md).

// attack16uDirsEnv names, for TestAttackHiddenDirClosedByMode's run as
// the unprivileged user, the stand-ins TestAttack16uUnprivileged made as
// root: a group's search-only directory and a directory of the user's own
// that its mode closes, each holding key.pem, separated by a newline.
const attack16uDirsEnv = "AGENTPROC_ATK16U_DIRS"

// TestAttack16uUnprivileged makes, as root, the stand-ins of
// TestAttackHiddenDirClosedByMode and runs it, with
// TestAttackHomeCredentialsWithoutHOME, as the unprivileged user, where
// Landlock is the whole of Hide.
func TestAttack16uUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make the stand-ins and switch users")
	}
	u, err := user.Lookup(sandboxUser)
	if err != nil {
		t.Skipf("no user %s: %v", sandboxUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dirs := makeClosedByModeDirs(t, uid, gid)
	tests := []string{"TestAttackHiddenDirClosedByMode", "TestAttackHomeCredentialsWithoutHOME", "TestAttackRuntimeDirAuthWithoutXDG", "TestAttackXDGConfigHomeCredentials"}
	out, err := testuser.Run(t, 2*time.Minute, []string{attack16uDirsEnv + "=" + strings.Join(dirs, "\n")},
		"-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, test := range tests {
		if !strings.Contains(out, "--- PASS: "+test+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, test, out)
		}
	}
}

// makeClosedByModeDirs makes, as root, two directories that the user uid
// (group gid) may not list, each with a key.pem it may read once there:
// root's, mode 0710, group gid (as /etc/ssl/private is root's and the
// ssl-cert group's, which services such as PostgreSQL are in), with the
// key 0640; and uid's own, mode 0 (a user's way of shutting a directory),
// with the key 0600. Cleanup removes them.
func makeClosedByModeDirs(t *testing.T, uid, gid int) []string {
	t.Helper()
	base, err := os.MkdirTemp("", "agentproc-atk16u-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	group, own := filepath.Join(base, "private"), filepath.Join(base, "shut")
	for _, d := range []struct {
		dir              string
		owner, group     int
		dirMode, keyMode os.FileMode
		key              string
	}{
		{group, 0, gid, 0o710, 0o640, "GROUP-SEARCH-ONLY-KEY\n"},
		{own, uid, gid, 0, 0o600, "OWN-SHUT-DIR-KEY\n"},
	} {
		key := filepath.Join(d.dir, "key.pem")
		if err := os.Mkdir(d.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(key, []byte(d.key), d.keyMode); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{key, d.dir} {
			if err := os.Chown(p, d.owner, d.group); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(d.dir, d.dirMode); err != nil {
			t.Fatal(err)
		}
	}
	return []string{group, own}
}

// TestAttackHiddenDirClosedByMode: without root a hidden path was left
// out of the Landlock layer's Hide when the host could not read it
// (confine.LandlockHidden: "less what this user cannot read anyway"),
// taking a refused read for one a tree is refused too. Two ways past:
// a directory that this user may search but not list (mode 0710 of a
// group it is in, as /etc/ssl/private of the ssl-cert group) still
// opens its entries by name, so `cat /etc/ssl/private/key.pem` read the
// key; and a directory of the user's own shut by its mode (0) is opened
// again by `chmod 700` from the tree (metadata outside Write is not
// protected without root), then read. The control runs the same
// commands unconfined and reads both keys. Runs as the unprivileged
// user, through TestAttack16uUnprivileged; as root nothing is left out
// (root reads everything) and the mount namespace covers both.
func TestAttackHiddenDirClosedByMode(t *testing.T) {
	requireSandbox(t)
	dirs := strings.Split(os.Getenv(attack16uDirsEnv), "\n")
	if len(dirs) != 2 {
		t.Skip("the stand-ins are root's: TestAttack16uUnprivileged makes them and runs this as " + sandboxUser)
	}
	group, own := dirs[0], dirs[1]
	cmd := "cat " + shellQuote(filepath.Join(group, "key.pem")) + "; chmod 700 " + shellQuote(own) + " && cat " + shellQuote(filepath.Join(own, "key.pem"))
	ws := t.TempDir()
	req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
	ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	if !strings.Contains(ctl, "GROUP-SEARCH-ONLY-KEY") || !strings.Contains(ctl, "OWN-SHUT-DIR-KEY") {
		t.Fatalf("control without the sandbox: got %q, want both keys read", ctl)
	}
	if err := os.Chmod(own, 0); err != nil {
		t.Fatal(err)
	}
	sb := agentproc.WorkspaceSandbox(ws)
	sb.Hide = append(sb.Hide, group, own)
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(sb)), req).Text
	for _, key := range []string{"GROUP-SEARCH-ONLY-KEY", "OWN-SHUT-DIR-KEY"} {
		if strings.Contains(out, key) {
			t.Errorf("a hidden key was read in a directory its mode closed to the host: got %q, want %s refused", out, key)
		}
	}
	_ = os.Chmod(own, 0o700) // for Cleanup's removal (the tree may have done it)
}

// TestAttackHomeCredentialsWithoutHOME: WorkspaceSandbox hid the
// credential paths under $HOME alone. A host started without $HOME (a
// systemd service without User=, a script under env -i) hid none of the
// home's, and one whose $HOME names a scratch directory (a tool's or a
// test runner's) hid the scratch home's: either way a tree read ~/.ssh
// and ~/.aws of the user's real home, which it finds by name in
// /etc/passwd. The stand-in for that home is given by SetPasswdHome. The
// control reads both keys unconfined; a second control runs a policy
// whose work dir is the password database's home (a service's), which
// must not be refused for the credential paths inside it. Runs as root
// and, through TestAttack16uUnprivileged, not.
func TestAttackHomeCredentialsWithoutHOME(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	for p, s := range map[string]string{".ssh/id_ed25519": "REAL-HOME-SSH-KEY\n", ".aws/credentials": "REAL-HOME-AWS-KEY\n"} {
		if err := os.MkdirAll(filepath.Join(home, filepath.Dir(p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, p), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	agentproc.SetPasswdHome(t, home)
	ws := t.TempDir()
	req := agentproc.Request{Command: "cat " + shellQuote(filepath.Join(home, ".ssh/id_ed25519")) + " " + shellQuote(filepath.Join(home, ".aws/credentials")),
		WorkDir: ws, Timeout: time.Minute}
	ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	if !strings.Contains(ctl, "REAL-HOME-SSH-KEY") || !strings.Contains(ctl, "REAL-HOME-AWS-KEY") {
		t.Fatalf("control without the sandbox: got %q, want both keys read", ctl)
	}
	for _, scratch := range []string{"", t.TempDir()} {
		t.Setenv("HOME", scratch)
		if scratch == "" {
			if err := os.Unsetenv("HOME"); err != nil {
				t.Fatal(err)
			}
		}
		out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
		if strings.Contains(out, "REAL-HOME-SSH-KEY") || strings.Contains(out, "REAL-HOME-AWS-KEY") {
			t.Errorf("HOME %q: the real home's credentials were read: got %q, want both refused", scratch, out)
		}
	}
	p := mustStart(t, newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(home))), agentproc.Request{Command: "true", WorkDir: home, Timeout: time.Minute})
	if info := mustWait(t, p); exitCode(info) != 0 {
		t.Errorf("control: a policy whose work dir is the password database's home: exit %d, want it to run", exitCode(info))
	}
}

// TestAttackRuntimeDirAuthWithoutXDG: Podman's, Buildah's and skopeo's
// registry logins live in the runtime dir (containers/auth.json), which
// WorkspaceSandbox hid where $XDG_RUNTIME_DIR named it only. A host
// without the session's variables (a service, cron, env -i) hid none,
// while the file is at logind's /run/user/UID, where those tools look
// when the variable is unset, and a tree reads it there. The stand-in for
// /run/user/UID is given by SetUserRuntimeDir. The control reads it
// unconfined. Runs as root and, through TestAttack16uUnprivileged, not.
func TestAttackRuntimeDirAuthWithoutXDG(t *testing.T) {
	requireSandbox(t)
	rt := t.TempDir()
	auth := filepath.Join(rt, "containers", "auth.json")
	if err := os.MkdirAll(filepath.Dir(auth), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(auth, []byte(`{"auths":{"quay.io":{"auth":"RUNTIME-DIR-REGISTRY-LOGIN"}}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agentproc.SetUserRuntimeDir(t, rt)
	t.Setenv("XDG_RUNTIME_DIR", "")
	if err := os.Unsetenv("XDG_RUNTIME_DIR"); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	req := agentproc.Request{Command: "cat " + shellQuote(auth), WorkDir: ws, Timeout: time.Minute}
	if ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text; !strings.Contains(ctl, "RUNTIME-DIR-REGISTRY-LOGIN") {
		t.Fatalf("control without the sandbox: got %q, want the login read", ctl)
	}
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	if strings.Contains(out, "RUNTIME-DIR-REGISTRY-LOGIN") {
		t.Errorf("the runtime dir's registry login was read: got %q, want it refused", out)
	}
}

// TestAttackRootPM2WithoutHOME: root's PM2 daemon starts any command its
// RPC socket is sent, and the doors named it under $HOME only: a root
// host without $HOME (a systemd service without User=) left
// ~/.pm2/rpc.sock of root's home open to a root tree. The stand-in for
// root's home is given by SetPasswdHome. The control reaches both sockets
// unconfined.
func TestAttackRootPM2WithoutHOME(t *testing.T) {
	requireRootSandbox(t)
	home := t.TempDir()
	agentproc.SetPasswdHome(t, home)
	t.Setenv("HOME", "")
	if err := os.Unsetenv("HOME"); err != nil {
		t.Fatal(err)
	}
	pm2 := filepath.Join(home, ".pm2")
	requireDoorsShut(t, t.TempDir(), map[string][]string{
		filepath.Join(pm2, "rpc.sock"): {pm2},
		filepath.Join(pm2, "pub.sock"): {pm2},
	})
}

// TestAttackXDGConfigHomeCredentials: the tools that follow the XDG base
// directories keep their credentials under $XDG_CONFIG_HOME and
// $XDG_DATA_HOME where those are set (gh's hosts.yml, git's credentials,
// rclone's remotes, uv's credentials), and WorkspaceSandbox hid them
// under ~/.config and ~/.local/share only: a host with either set
// elsewhere left them readable. The control reads each unconfined. Runs
// as root and, through TestAttack16uUnprivileged, not.
func TestAttackXDGConfigHomeCredentials(t *testing.T) {
	requireSandbox(t)
	t.Setenv("HOME", t.TempDir())
	cfg, data := t.TempDir(), t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("XDG_DATA_HOME", data)
	files := map[string]string{filepath.Join(cfg, "gh", "hosts.yml"): "XDG-GH-TOKEN\n",
		filepath.Join(cfg, "git", "credentials"): "XDG-GIT-CREDENTIAL\n", filepath.Join(data, "uv", "credentials"): "XDG-UV-CREDENTIAL\n"}
	cmd := ""
	for p, s := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd += "cat " + shellQuote(p) + "; "
	}
	ws := t.TempDir()
	req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
	ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for p, s := range files {
		s = strings.TrimSpace(s)
		if !strings.Contains(ctl, s) {
			t.Fatalf("control without the sandbox: got %q, want %s read", ctl, p)
		}
		if strings.Contains(out, s) {
			t.Errorf("%s was read under the XDG base directory: got %q, want it refused", p, out)
		}
	}
}
