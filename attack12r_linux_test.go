package agentproc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// Tests of the twelfth attack review (root): docs/sandbox-threats.md,
// "Twelfth attack review (root)".

func init() {
	agentproc.RegisterHelper("sigiohost", helperSigioHost, false)
}

// Environment of the sigiohost helper: the probe to run, its work dir,
// how many Starts, and whether they are sandboxed.
const (
	sigioProbeEnv   = "AGENTPROC_TEST_SIGIO_PROBE"
	sigioWSEnv      = "AGENTPROC_TEST_SIGIO_WS"
	sigioStartsEnv  = "AGENTPROC_TEST_SIGIO_STARTS"
	sigioSandboxEnv = "AGENTPROC_TEST_SIGIO_SANDBOX"
	// The fifth mend's: each forking thread lingers this long (a
	// time.Duration) after it lets its tree go, and no tree is held.
	sigioLingerEnv = "AGENTPROC_TEST_SIGIO_LINGER"
	sigioNoHoldEnv = "AGENTPROC_TEST_SIGIO_NOHOLD"
)

// helperSigioHost is a host that runs the probe named in its environment
// the given number of times, one Start after the other, sandboxed under
// WorkspaceSandbox or not, and prints how many printed DONE. A tree that
// reaches one of its threads with SIGKILL ends it before it prints.
func helperSigioHost() int {
	probe, ws := os.Getenv(sigioProbeEnv), os.Getenv(sigioWSEnv)
	starts, err := strconv.Atoi(os.Getenv(sigioStartsEnv))
	if err != nil {
		fmt.Println("bad start count:", err)
		return 2
	}
	if d, err := time.ParseDuration(os.Getenv(sigioLingerEnv)); err == nil {
		defer agentproc.LingerForkingThread(d)()
	}
	if os.Getenv(sigioNoHoldEnv) != "" {
		defer agentproc.FailThreadPidfd(syscall.EINVAL)()
	}
	var opts []agentproc.Option
	if os.Getenv(sigioSandboxEnv) != "" {
		opts = append(opts, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	}
	m := agentproc.New(opts...)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := 0
	for range starts {
		p, err := m.Start(ctx, agentproc.Request{Command: "exec " + probe, WorkDir: ws, Timeout: time.Minute})
		if err != nil {
			fmt.Println("start:", err)
			return 1
		}
		if _, err := p.Wait(ctx); err != nil {
			fmt.Println("wait:", err)
			return 1
		}
		if strings.HasPrefix(p.Output().Text, "DONE") {
			done++
		}
	}
	fmt.Printf("host: %d of %d probes done\n", done, starts)
	return 0
}

// sigioProbe, run as a tree's leader, 100 times lists its parent's
// threads (/proc/$PPID/task), makes each thread the owner of a pipe
// (F_SETOWN_EX with F_OWNER_TID) whose read end asks for a signal (its
// first argument, SIGKILL by default) on each write (O_ASYNC, F_SETSIG),
// and writes to it, so that the kernel sends that thread the signal. The
// first listing comes first and each pipe is made on its first use:
// the forking thread lives for microseconds after the tree starts.
// Static, so that it starts without the loader's milliseconds.
const sigioProbe = `#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
static int sig, rd[64], wr[64], made;
/* aim makes thread t the owner of pipe i, made on first use, and writes
   to it: the kernel then sends t the signal. */
static void aim(int i, int t) {
	if (i == made) {
		int p[2];
		if (pipe2(p, O_NONBLOCK)) exit(1);
		fcntl(p[0], F_SETSIG, sig);
		fcntl(p[0], F_SETFL, O_ASYNC | O_NONBLOCK);
		rd[i] = p[0];
		wr[i] = p[1];
		made++;
	}
	struct f_owner_ex o = {F_OWNER_TID, t};
	fcntl(rd[i], F_SETOWN_EX, &o);
	if (write(wr[i], "x", 1) < 0) {
		char c;
		while (read(rd[i], &c, 1) > 0) {
		}
	}
}
int main(int argc, char **argv) {
	sig = argc > 1 ? atoi(argv[1]) : SIGKILL;
	char path[64], buf[8192];
	snprintf(path, sizeof path, "/proc/%d/task", getppid());
	for (int round = 0; round < 100; round++) {
		int fd = open(path, O_RDONLY | O_DIRECTORY), n = 0;
		long r;
		while (fd >= 0 && (r = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
			for (long off = 0; off < r; off += *(unsigned short *)(buf + off + 16)) {
				int t = atoi(buf + off + 19);
				if (t > 0 && n < 64) aim(n++, t);
			}
		if (fd >= 0) close(fd);
	}
	printf("DONE\n");
	return 0;
}
`

// runSigioHost runs the sigiohost helper with starts Starts of probe in
// ws, sandboxed or not, with env added, and returns its output and exit
// error.
func runSigioHost(t *testing.T, probe, ws string, starts int, sandboxed bool, env ...string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(),
		agentproc.HelperEnv+"="+agentproc.UseHelper("sigiohost"),
		sigioProbeEnv+"="+probe,
		sigioWSEnv+"="+ws,
		sigioStartsEnv+"="+strconv.Itoa(starts))
	if sandboxed {
		cmd.Env = append(cmd.Env, sigioSandboxEnv+"=1")
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the host did not end in time: %s", out)
	}
	return string(out), err
}

// killedBySIGKILL reports whether err is the exit of a process that
// SIGKILL ended.
func killedBySIGKILL(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// TestAttackForkingThreadSIGIO: the eleventh review's fix for the thread
// that forks a tree (it shares the tree's Landlock domain) was, as root,
// to give that thread alone the uid 0x7ffffffe before the tree runs
// (leaveTreeUID), since kill needs a uid in common or CAP_KILL. A signal
// the kernel sends for a file's owner (F_SETOWN_EX with F_OWNER_TID, then
// F_SETSIG and O_ASYNC: SIGIO, or any signal chosen, at each write) is
// checked otherwise: sigio_perm lets an owner recorded with euid 0 signal
// a thread of any uid, capabilities or not, and Landlock's
// file_send_sigiotask hook allows it within one domain. A root tree that
// made the forking thread the owner of a pipe with F_SETSIG(SIGKILL)
// ended the host (exit 137) at the fifth Start by hand. The tree is now
// held stopped until the thread is gone, as without root.
func TestAttackForkingThreadSIGIO(t *testing.T) {
	requireSandbox(t)
	probe, ws := staticProbe(t, sigioProbe)
	// Control: unconfined, every thread of the host may be the owner, and
	// the first Start ends the host.
	if out, err := runSigioHost(t, probe, ws, 1, false); !killedBySIGKILL(err) {
		t.Fatalf("control without the sandbox: got %v (%q), want the host killed by SIGKILL", err, out)
	}
	const starts = 60
	out, err := runSigioHost(t, probe, ws, starts, true)
	if killedBySIGKILL(err) {
		t.Fatalf("a sandboxed tree ended its host with SIGKILL sent for a pipe it made the forking thread own: %q", out)
	}
	if want := fmt.Sprintf("host: %d of %d probes done", starts, starts); err != nil || !strings.Contains(out, want) {
		t.Fatalf("sandboxed host: got %v, %q, want %q", err, out, want)
	}
}

// TestAttack12rUnprivileged re-runs the twelfth review's tests that hold
// without root as the unprivileged user: there sigio_perm allows the
// owner's signal by the uid the tree shares with the host, and the hold
// alone stands in the way.
func TestAttack12rUnprivileged(t *testing.T) {
	tests := []string{"TestAttackForkingThreadSIGIO"}
	out, err := runAsSandboxUser(t, 2*time.Minute, "-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, name, out)
		}
	}
}

// TestAttackHiddenDirLinkToUsrLocal: the eleventh review counted a hidden
// directory's link target as a public system file only under the
// system's own trees (systemTrees), leaving out /etc and /opt, "where a
// secret or a repository may be put by hand". /usr/local is that place
// under /usr: the administrator's own software and, in /usr/local/src,
// the sources they clone. A dotfile repository cloned as root there and
// linked from /root/.aws (files 0644, directories 0755, as git checks them
// out) passed the rule, and the credentials were read at the target.
func TestAttackHiddenDirLinkToUsrLocal(t *testing.T) {
	requireRootSandbox(t)
	wantRootDotfileLinkHidden(t, "/usr/local/src")
}

// TestAttackGitHooksPathInWorkspace: WorkspaceSandbox holds ws/.git
// read-only as root so that a tree cannot write a hook the agent runs
// unconfined at its next git ("ReadOnly made later or again" in
// docs/sandbox-threats.md). A repository whose core.hooksPath names a
// directory in the work dir (husky's .husky/_ since husky 5, or a plain
// .githooks) keeps its hooks where the tree writes: the tree's
// .githooks/pre-commit ran as root at the host's git commit, while its
// write to .git/hooks was refused. Open: the hooks' directory is the
// project's own, tracked and edited by the model as any file (husky's
// stubs run .husky/pre-commit, one level up), so binding it read-only
// takes a decision the review left to the lead.
func TestAttackGitHooksPathInWorkspace(t *testing.T) {
	if os.Getenv("ATK12R_RUN_OPEN") == "" {
		t.Skip("open: a core.hooksPath inside the work dir (husky, .githooks) lets a tree write a hook the agent's next git commit runs unconfined (docs/sandbox-threats.md, twelfth attack review (root))")
	}
	requireRootSandbox(t)
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	marker := filepath.Join(dir, "hook-ran")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command(gitPath, append([]string{"-C", ws, "-c", "user.name=a", "-c", "user.email=a@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(filepath.Join(ws, ".githooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", ".")
	git("config", "core.hooksPath", ".githooks")
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	plant := "printf '#!/bin/sh\\ntouch " + shellQuote(marker) + "\\n' > %s && chmod +x %s && echo planted"
	// Control: the protection in place: .git/hooks is read-only.
	if out := runSandboxed(t, m, agentproc.Request{Command: fmt.Sprintf(plant, ".git/hooks/pre-commit", ".git/hooks/pre-commit") + "; true", WorkDir: ws}); strings.Contains(out.Text, "planted") {
		t.Fatalf("control: a hook written to .git/hooks: got %q, want it refused", out.Text)
	}
	out := runSandboxed(t, m, agentproc.Request{Command: fmt.Sprintf(plant, ".githooks/pre-commit", ".githooks/pre-commit"), WorkDir: ws})
	if !strings.Contains(out.Text, "planted") {
		t.Fatalf("the tree could not write .githooks/pre-commit: %q", out.Text)
	}
	git("commit", "-q", "--allow-empty", "-m", "x")
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the host's git commit ran a hook a sandboxed tree wrote to the core.hooksPath in the work dir, want no hook of the tree's run")
	}
}
