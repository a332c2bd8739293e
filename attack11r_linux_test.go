package agentproc_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// Tests of the eleventh attack review (root): docs/sandbox-threats.md,
// "Eleventh attack review (root)".

// TestAttackHiddenDirLinkToPublicDotfiles: the tenth review stopped hiding
// a hidden directory's link target that is root's and readable by every
// local user (systemPublic), so that a virtualenv's link to the system's
// python3 was not taken from every tree. For a host that runs as root
// every file of its user is root's: a dotfile repository cloned as root
// outside /root (/opt/dotfiles, /srv/dotfiles: git checks files out 0644
// and directories 0755 under umask 022) and stowed into /root/.aws is
// "public" by that rule, and the credentials the ninth review hid at the
// links' targets were read there again. A system file is one under the
// system's own trees, not any file of root's.
func TestAttackHiddenDirLinkToPublicDotfiles(t *testing.T) {
	requireRootSandbox(t)
	// The repository sits where every user may search: /tmp is 1777, the
	// repository's directories 0755 and its files 0644, as a clone is.
	wantRootDotfileLinkHidden(t, os.TempDir())
}

// threadProbe, run as a tree's leader, lists its parent's threads
// (/proc/$PPID/task) at its first instruction and sends each signal 0
// with tgkill, which checks the permission as a real signal would, 200
// rounds; it prints HIT and the thread's ID where one was allowed, else
// MISS. Static, so that it starts without the loader's milliseconds.
const threadProbe = `#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
	int ppid = getppid(), tids[512], n = 0;
	char path[64], buf[8192];
	snprintf(path, sizeof path, "/proc/%d/task", ppid);
	int fd = open(path, O_RDONLY | O_DIRECTORY);
	long r;
	while (fd >= 0 && (r = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
		for (long off = 0; off < r;) {
			unsigned short reclen = *(unsigned short *)(buf + off + 16);
			int t = atoi(buf + off + 19);
			if (t > 0 && n < 512) tids[n++] = t;
			off += reclen;
		}
	for (int k = 0; k < 200; k++)
		for (int i = 0; i < n; i++)
			if (syscall(SYS_tgkill, ppid, tids[i], 0) == 0) {
				printf("HIT %d of %d\n", tids[i], n);
				return 0;
			}
	printf("MISS of %d\n", n);
	return 0;
}
`

// TestAttackForkingThreadSignalled: each sandboxed Start confines a thread
// of the host and forks the tree from it, so the tree is in that thread's
// Landlock domain, whose scope lets a domain's processes signal each
// other. The thread was thrown away after the start, but lived on through
// the rest of the Start and the Go runtime's thread exit while the tree
// already ran: a static program that sent tgkill(host, thread, 0) to each
// of the host's threads at its first instruction was allowed for one in
// about eight Starts here, and with SIGKILL it ended the host (exit 137
// after ten Starts). Without root the same window lets a tree of the
// host's user trace that thread (no capability stands between them).
// Now the tree is held stopped until the thread is gone.
func TestAttackForkingThreadSignalled(t *testing.T) {
	requireSandbox(t)
	probe, ws := staticProbe(t, threadProbe)
	plain := newManager(t)
	if ctl := runSandboxed(t, plain, agentproc.Request{Command: "exec " + probe, WorkDir: ws, Timeout: time.Minute}); !strings.HasPrefix(ctl.Text, "HIT") {
		t.Fatalf("control without the sandbox: got %q, want a thread of the host signalled", ctl.Text)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	const starts = 40
	var hits []string
	for range starts {
		out := runSandboxed(t, m, agentproc.Request{Command: "exec " + probe, WorkDir: ws, Timeout: time.Minute})
		switch {
		case strings.HasPrefix(out.Text, "HIT"):
			hits = append(hits, strings.TrimSpace(out.Text))
		case !strings.HasPrefix(out.Text, "MISS"):
			t.Fatalf("probe in the sandbox: got %q, want HIT or MISS", out.Text)
		}
	}
	if len(hits) > 0 {
		t.Errorf("a thread of the host took a sandboxed tree's signal in %d of %d Starts (%s), want none", len(hits), starts, strings.Join(hits, "; "))
	}
	wantLingeringThreadMissed(t, probe, ws)
}

// TestAttack11rUnprivileged re-runs the eleventh review's tests that hold
// without root as the unprivileged user.
func TestAttack11rUnprivileged(t *testing.T) {
	tests := []string{"TestAttackForkingThreadSignalled"}
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
