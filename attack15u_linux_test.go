package agentproc_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// Tests of the fifteenth attack review (unprivileged and the surfaces):
// docs/sandbox-threats.md, "Fifteenth attack review (unprivileged and
// the surfaces)".

// TestAttackProxyTokenThroughAnotherTree: a NetworkHosts tree's proxy
// token was redacted in that tree's output alone ("no other stream is
// given it"), but the tree can hand it to another tree of the same
// Manager without passing through its own output: a file in the work dir
// they share (as a request's secrets can, seventh attack review). The
// second tree printed it whole to the model, which could then have any
// process that reaches the listener's port use the first tree's proxy
// while it runs. The control: the second tree reads the file (its output
// carries the proxy URL's user), and the first tree's own output redacts
// the token. Runs as root and, through TestAttack15uUnprivileged, not.
func TestAttackProxyTokenThroughAnotherTree(t *testing.T) {
	requireHosts(t)
	m := newManager(t)
	sb := hostsSandbox(t, "allowed.example")
	ws := sb.Write[0]
	req := hostsRequest(t, sb, `printf '%s\n' "$HTTPS_PROXY" > proxy.txt; echo "own $HTTPS_PROXY"; read x`)
	req.Stdin = true
	holder := mustStart(t, m, req)
	defer func() { _, _ = holder.Stop(testContext(t)) }()
	// The whole line, to the port: the redactor holds back a tail that may
	// be the start of a secret until the rest arrives or a moment passes,
	// so "own http://agentproc:" alone was seen first under make stress.
	waitForOutput(t, holder, regexp.MustCompile(`own http://agentproc:\S*@127\.0\.0\.1:\d+`))
	data, err := os.ReadFile(filepath.Join(ws, "proxy.txt"))
	if err != nil {
		t.Fatal(err)
	}
	token := regexp.MustCompile(`^http://agentproc:([A-Z2-7]+)@`).FindSubmatch(data)
	if token == nil {
		t.Fatalf("control: the file holds %q, want the proxy URL with its token", data)
	}
	if own := holder.Output().Text; strings.Contains(own, string(token[1])) || !strings.Contains(own, "[redacted:AGENTPROC_PROXY_TOKEN]") {
		t.Fatalf("control: the holder's own output %q, want its token redacted", own)
	}
	reader := agentproc.WorkspaceSandbox(ws)
	out := runSandboxed(t, m, agentproc.Request{Command: "cat proxy.txt", WorkDir: ws, Sandbox: reader, Timeout: time.Minute}).Text
	if !strings.Contains(out, "http://agentproc:") {
		t.Fatalf("control: the second tree's output %q, want the file it read", out)
	}
	if strings.Contains(out, string(token[1])) {
		t.Errorf("the second tree's output %q shows the first tree's proxy token, want it redacted", out)
	}
}

// TestAttackProxyListenerAfterTreeEnded (held): a tree's proxy listener,
// on the host's loopback without root, is closed by the time Wait
// returns, so its token, however it leaked, opens nothing once the tree
// has ended. The control: the tree's output names the listener's port.
// Runs as the unprivileged test user, through TestAttack15uUnprivileged
// (as root the listener is in the tree's own network namespace).
func TestAttackProxyListenerAfterTreeEnded(t *testing.T) {
	requireHosts(t)
	if os.Geteuid() == 0 {
		t.Skip("the listener is on the host's loopback without root alone (TestAttack15uUnprivileged)")
	}
	m := newManager(t)
	out := runSandboxed(t, m, hostsRequest(t, hostsSandbox(t, "allowed.example"), `echo "proxy $HTTPS_PROXY"`)).Text
	port := regexp.MustCompile(`proxy http://agentproc:\[redacted:AGENTPROC_PROXY_TOKEN\]@127\.0\.0\.1:(\d+)`).FindStringSubmatch(out)
	if port == nil {
		t.Fatalf("control: output %q, want the proxy's address", out)
	}
	// Whether this process still listens there, not whether anything
	// does: under make test another test's server may take the freed
	// port at once (it did, in a fresh-clone .ci/run).
	if ownsListener(t, port[1]) {
		t.Errorf("the ended tree's listener on port %s: still open in the host, want it closed", port[1])
	}
}

// ownsListener reports whether this process holds a socket listening on
// 127.0.0.1:port (decimal): a LISTEN row of /proc/net/tcp with that port
// whose inode is one of this process's descriptors.
func ownsListener(t *testing.T, port string) bool {
	t.Helper()
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("0100007F:%04X", p)
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 9 && f[1] == want && f[3] == "0A" {
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && inodes[l] {
			return true
		}
	}
	return false
}

// TestAttack15uUnprivileged re-runs this review's tests as the
// unprivileged test user, where the tree is held by Landlock and seccomp
// alone and the proxy's listener is on the host's loopback.
func TestAttack15uUnprivileged(t *testing.T) {
	rerunAsSandboxUser(t, []string{"TestAttackProxyTokenThroughAnotherTree", "TestAttackHideWatchInstanceRefusedOnce", "TestAttackProxyListenerAfterTreeEnded"}, false)
}
