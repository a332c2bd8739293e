package agentproc_test

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testuser"
)

// Tests of the twelfth attack review (unprivileged and the surfaces):
// docs/sandbox-threats.md, "Twelfth attack review (unprivileged and the
// surfaces)".

// TestAttackTreeHoldFailsOpen: without root a sandboxed tree is held
// stopped until the thread that forked it, which shares its Landlock
// domain, has exited (the eleventh review's treeHold); the hold needs a
// pidfd of that thread. holdTree gave up on the hold at any failure of
// that pidfd, as it does where the kernel has no thread pidfds, so a host
// short of descriptors (EMFILE) or memory started its tree unheld, beside
// the thread, and said nothing: the window of
// TestAttackForkingThreadSignalled (the host's environment and memory, a
// SIGKILL to the host) was open again. The Start must fail instead. The
// control has the kernel lack thread pidfds (EINVAL), the documented open
// case, where the tree runs; and the real pidfd, after the failures, where
// the Start runs held: the failures left the Manager usable. Both paths
// (the throwaway first thread and the ready thread of later Starts) are
// taken. As root and, through TestAttack12uUnprivileged, not (as root
// the tree is held too since the twelfth review's SIGIO route).
func TestAttackTreeHoldFailsOpen(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	run := func() (string, error) {
		p, err := m.Start(t.Context(), agentproc.Request{Command: "echo RAN", WorkDir: ws, Timeout: time.Minute})
		if err != nil {
			return "", err
		}
		mustWait(t, p)
		return p.Output().Text, nil
	}
	restore := agentproc.FailThreadPidfd(syscall.EINVAL)
	for i := range 3 {
		if out, err := run(); err != nil || !strings.Contains(out, "RAN") {
			restore()
			t.Fatalf("control: Start %d without thread pidfds (an old kernel): got %v (%q), want it run", i, err, out)
		}
	}
	restore()
	restore = agentproc.FailThreadPidfd(syscall.EMFILE)
	for i := range 3 {
		out, err := run()
		if err == nil {
			t.Errorf("Start %d, the thread's pidfd failing with EMFILE: got the tree run unheld (%q), want the Start refused", i, out)
		} else if !strings.Contains(err.Error(), "too many open files") {
			t.Errorf("Start %d, the thread's pidfd failing with EMFILE: got %v, want an error naming it", i, err)
		}
	}
	restore()
	if out, err := run(); err != nil || !strings.Contains(out, "RAN") {
		t.Fatalf("control: Start with the thread's pidfd after the failures: got %v (%q), want it run", err, out)
	}
}

// siblingWatcher, run as a tree, spends argv[1] milliseconds looking for
// another tree to wake or a thread of the host to reach: each round it
// sends SIGCONT to every stopped process it finds in /proc but itself (a
// tree held by treeHold, or one stopped by its own SIGSTOP), and signal 0
// with tgkill to each thread of its parent, whose environ it also tries
// to read. It prints what it saw and what it was allowed.
const siblingWatcher = `#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static long now_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
int main(int argc, char **argv) {
	long end = now_ms() + atol(argv[1]);
	int self = getpid(), ppid = getppid(), stopped = 0, woke = 0, threads = 0, signalled = 0, environ = 0;
	char path[96], buf[512];
	while (now_ms() < end) {
		DIR *d = opendir("/proc");
		struct dirent *e;
		while (d && (e = readdir(d))) {
			int pid = atoi(e->d_name);
			if (pid <= 0 || pid == self) continue;
			snprintf(path, sizeof path, "/proc/%d/stat", pid);
			int fd = open(path, O_RDONLY);
			if (fd < 0) continue;
			ssize_t n = read(fd, buf, sizeof buf - 1);
			close(fd);
			if (n <= 0) continue;
			buf[n] = 0;
			char *p = strrchr(buf, ')');
			if (!p || p[1] != ' ' || p[2] != 'T') continue;
			stopped++;
			if (kill(pid, SIGCONT) == 0) woke++;
		}
		if (d) closedir(d);
		snprintf(path, sizeof path, "/proc/%d/task", ppid);
		d = opendir(path);
		while (d && (e = readdir(d))) {
			int tid = atoi(e->d_name);
			if (tid <= 0) continue;
			threads++;
			if (syscall(SYS_tgkill, ppid, tid, 0) == 0) signalled++;
			snprintf(path, sizeof path, "/proc/%d/task/%d/environ", ppid, tid);
			int fd = open(path, O_RDONLY);
			if (fd >= 0) {
				if (read(fd, buf, sizeof buf) > 0) environ++;
				close(fd);
			}
		}
		if (d) closedir(d);
	}
	printf("stopped %d woke %d threads %d signalled %d environ %d\n", stopped, woke, threads, signalled, environ);
	return 0;
}
`

// TestAttackSiblingWakesHeldTree: the eleventh review holds an
// unprivileged tree stopped until the thread that forked it is gone, and
// continues it then (treeHold). A tree woken early, by anything but the
// host, runs beside that thread. A sibling tree of the same policy, made
// by the same Manager, ran a watcher that sent SIGCONT to every stopped
// process it found in /proc while other Starts ran (their trees held for
// the thread's exit), and to a tree stopped by its own SIGSTOP; it also
// signalled and read the environ of every thread of the host, the next
// Start's ready thread and each forking thread included. Held: each tree
// has a Landlock domain of its own (its forking thread's), and the signal
// scope and the ptrace rule refuse a sibling domain. The control is the
// same watcher unconfined: it wakes the stopped tree and signals the
// host's threads. Runs as root and, through TestAttack12uUnprivileged, not.
func TestAttackSiblingWakesHeldTree(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	compileC(t, dir, "watcher", siblingWatcher, "-O2")
	watcher := filepath.Join(dir, "watcher")
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	victim := mustStart(t, m, agentproc.Request{Command: "kill -STOP $$; echo RESUMED", WorkDir: ws, Background: true})
	stat := fmt.Sprintf("/proc/%d/stat", victim.Info().PID)
	waitFor(t, func() bool {
		b, _ := os.ReadFile(stat)
		i := strings.LastIndexByte(string(b), ')')
		return i > 0 && i+2 < len(b) && b[i+2] == 'T'
	}, "the victim tree to stop itself")
	w := mustStart(t, m, agentproc.Request{Command: "exec " + watcher + " 400", WorkDir: ws, Background: true})
	for range 10 {
		runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: ws, Timeout: time.Minute})
	}
	mustWait(t, w)
	counts := watcherCounts(t, w.Output().Text)
	t.Logf("sandboxed watcher: %s", strings.TrimSpace(w.Output().Text))
	if counts["stopped"] == 0 {
		t.Fatalf("the sandboxed watcher saw no stopped tree (%q), want at least the victim", w.Output().Text)
	}
	if counts["woke"] != 0 || counts["signalled"] != 0 || counts["environ"] != 0 {
		t.Errorf("a sibling tree: got %q, want no tree woken, no thread of the host signalled or read", w.Output().Text)
	}
	if strings.Contains(victim.Output().Text, "RESUMED") {
		t.Errorf("the stopped tree was continued by its sibling: got %q", victim.Output().Text)
	}
	plain := newManager(t)
	ctl := runSandboxed(t, plain, agentproc.Request{Command: "exec " + watcher + " 50", WorkDir: ws, Timeout: time.Minute})
	if c := watcherCounts(t, ctl.Text); c["woke"] == 0 || c["signalled"] == 0 {
		t.Fatalf("control without the sandbox: got %q, want the stopped tree woken and the host's threads signalled", ctl.Text)
	}
	waitForOutput(t, victim, regexp.MustCompile("RESUMED"))
}

// watcherCounts parses siblingWatcher's line.
func watcherCounts(t *testing.T, out string) map[string]int {
	t.Helper()
	f := strings.Fields(out)
	if len(f) != 10 {
		t.Fatalf("watcher: got %q, want its counts", out)
	}
	c := map[string]int{}
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.Atoi(f[i+1])
		if err != nil {
			t.Fatalf("watcher: got %q, want its counts", out)
		}
		c[f[i]] = n
	}
	return c
}

// boundHomeEnv names, for the unprivileged run of
// TestAttackHiddenPathOtherMount, the directory that makeBoundHome made as
// root: the test itself cannot mount.
const boundHomeEnv = "AGENTPROC_TEST_BOUND_HOME"

// makeBoundHome makes, as root, dir/home with a key in home/.ssh and a
// project, owned by uid and gid, and binds home a second time at dir/alt
// (beside it) and at dir/deep/alt (elsewhere), and returns dir. Cleanup
// unmounts and removes them.
func makeBoundHome(t *testing.T, uid, gid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentproc-bound-")
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	alts := []string{filepath.Join(dir, "alt"), filepath.Join(dir, "deep", "alt")}
	t.Cleanup(func() {
		for _, a := range alts {
			_ = syscall.Unmount(a, syscall.MNT_DETACH)
		}
		_ = os.RemoveAll(dir)
	})
	for _, d := range append([]string{filepath.Join(home, ".ssh"), filepath.Join(home, "project")}, alts...) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(home, ".ssh", "id_ed25519")
	if err := os.WriteFile(key, []byte("BOUND-HOME-KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "deep")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{home, filepath.Join(home, ".ssh"), key, filepath.Join(home, "project")} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, a := range alts {
		if err := syscall.Mount(home, a, "", syscall.MS_BIND, ""); err != nil {
			t.Skipf("bind mount %s: %v", a, err)
		}
	}
	return dir
}

// TestAttackHiddenPathOtherMount: a file system mounted twice shows each
// file at two names: a home bound at /home from /data/home (a common
// fstab line on servers), a directory bound a second time beside its own,
// a btrfs top level mounted beside its subvolumes. WorkspaceSandbox hides
// ~/.ssh by its name, and Landlock's rules are on inodes: without root the
// grants (the siblings of each hidden path's ancestors) reached the key
// through the other mount's parents (dir/deep/alt/.ssh), and where the
// other mount was itself such a sibling (dir/alt beside dir/home), its
// grant was on home's own inode, so the key was read by its first name
// too; as root the cover is bound at the first name alone. The control
// reads the key at each name without the sandbox. Runs as root and,
// through TestAttack12uUnprivileged, not (root makes the mounts).
func TestAttackHiddenPathOtherMount(t *testing.T) {
	requireSandbox(t)
	dir := os.Getenv(boundHomeEnv)
	if dir == "" {
		if os.Geteuid() != 0 {
			t.Skip("the bind mounts need root: TestAttack12uUnprivileged makes them and runs this as " + sandboxUser)
		}
		dir = makeBoundHome(t, 0, 0)
	}
	home := filepath.Join(dir, "home")
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	names := []string{filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(dir, "alt", ".ssh", "id_ed25519"), filepath.Join(dir, "deep", "alt", ".ssh", "id_ed25519")}
	cmd := ""
	for _, n := range names {
		cmd += "echo " + shellQuote(n) + ": $(cat " + shellQuote(n) + " 2>&1); "
	}
	plain := newManager(t, agentproc.WithRedaction(false))
	if ctl := runSandboxed(t, plain, agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}).Text; strings.Count(ctl, "BOUND-HOME-KEY") != len(names) {
		t.Fatalf("control without the sandbox: got %q, want the key read at each of its %d names", ctl, len(names))
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, agentproc.Request{Command: cmd + "echo PROJECT $(ls " + shellQuote(filepath.Join(dir, "alt", "project")) + " && echo listed)", WorkDir: ws, Timeout: time.Minute}).Text
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "BOUND-HOME-KEY") {
			t.Errorf("a hidden key read under the sandbox: %q", line)
		}
	}
	if !strings.Contains(out, "listed") {
		t.Errorf("the other mount's unhidden part: got %q, want it readable", out)
	}
}

// editorBuildFiles are the extension state and MCP settings of VS Code's
// other builds and packages, each a file a tree should not read: a token
// in state.vscdb (Cursor's in the clear, VS Code's extension secrets under
// a fixed key where no keyring runs), a server's env block in mcp.json.
var editorBuildFiles = []string{
	".config/Code - Insiders/User/globalStorage/state.vscdb", ".config/Code - Insiders/User/mcp.json",
	".config/VSCodium/User/globalStorage/state.vscdb", ".config/VSCodium/User/mcp.json",
	".config/Code - OSS/User/globalStorage/state.vscdb", ".config/Code - OSS/User/mcp.json",
	".var/app/com.visualstudio.code/config/Code/User/globalStorage/state.vscdb",
	".var/app/com.visualstudio.code/config/Code/User/mcp.json",
	".var/app/com.vscodium.codium/config/VSCodium/User/globalStorage/state.vscdb",
	".var/app/com.vscodium.codium/config/VSCodium/User/mcp.json",
	".vscode-server-insiders/data/User/globalStorage/state.vscdb",
	".vscodium-server/data/User/globalStorage/state.vscdb",
	".windsurf-server/data/User/globalStorage/state.vscdb",
}

// TestAttackEditorBuildsSecrets: the ninth review hid VS Code's, Cursor's
// and Windsurf's extension state (User/globalStorage) and VS Code's
// mcp.json, by the stable build's paths. The same editor's other builds
// and packages keep the same files under their own names: VS Code
// Insiders, VSCodium, a distribution's Code - OSS, Flathub's VS Code and
// VSCodium (under ~/.var/app), and the Insiders, VSCodium and Windsurf
// remote servers. A tree read each. The control reads them without the
// sandbox. Runs as root and, through TestAttack12uUnprivileged, not.
func TestAttackEditorBuildsSecrets(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	var cmd strings.Builder
	for i, rel := range editorBuildFiles {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("EDITORSECRET-%d\n", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd.WriteString("cat " + shellQuote(p) + "; ")
	}
	cmd.WriteString("true")
	req := agentproc.Request{Command: cmd.String(), WorkDir: ws, Timeout: time.Minute}
	plain := newManager(t, agentproc.WithRedaction(false))
	if got, want := strings.Count(runSandboxed(t, plain, req).Text, "EDITORSECRET-"), len(editorBuildFiles); got != want {
		t.Fatalf("control without the sandbox: got %d files read, want %d", got, want)
	}
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, req).Text
	for i, rel := range editorBuildFiles {
		if strings.Contains(out, fmt.Sprintf("EDITORSECRET-%d\n", i)) {
			t.Errorf("~/%s: got it read, want it hidden", rel)
		}
	}
}

// TestAttack12uUnprivileged runs this review's tests as the unprivileged
// user, where the hold is the forking thread's only protection.
func TestAttack12uUnprivileged(t *testing.T) {
	requireSandbox(t)
	tests := []string{"TestAttackTreeHoldFailsOpen", "TestAttackSiblingWakesHeldTree", "TestAttackHiddenPathOtherMount", "TestAttackEditorBuildsSecrets"}
	u, err := user.Lookup(sandboxUser)
	if err != nil {
		t.Skipf("no user %s: %v", sandboxUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir := makeBoundHome(t, uid, gid)
	out, err := testuser.Run(t, 2*time.Minute, []string{boundHomeEnv + "=" + dir}, "-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, name, out)
		}
	}
}
