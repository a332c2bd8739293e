package agentproc_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// dialEnv tells the "unixdial" helper which Unix socket to dial.
const unixDialEnv = "AGENTPROC_TEST_UNIX_DIAL"

func init() {
	// unixdial connects to a Unix socket, prints the line the listener
	// answers and exits 0; 1 when it cannot connect.
	agentproc.RegisterHelper("unixdial", func() int {
		c, err := net.Dial("unix", os.Getenv(unixDialEnv))
		if err != nil {
			fmt.Println("cannot dial:", err)
			return 1
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Print(line)
		return 0
	}, false)
}

// serveEach accepts connections on l until the test ends, writes each
// what answer returns for it (nothing when it returns "") and closes it;
// the test's cleanup closes l and waits for the loop.
func serveEach(t *testing.T, l net.Listener, answer func(net.Conn) string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if a := answer(c); a != "" {
				_, _ = c.Write([]byte(a))
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
	})
}

// peerJudge listens on a Unix socket and answers each connection with
// MoreConfined of its peer (SO_PEERCRED), as agentproc serve does:
// "free" or "confined: why".
func peerJudge(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "judge.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o777); err != nil { // the unprivileged rerun's trees are this user anyway
		t.Fatal(err)
	}
	serveEach(t, l, func(c net.Conn) string {
		answer := "no peer credentials"
		if raw, err := c.(*net.UnixConn).SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) {
				cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
				if err != nil {
					answer = "SO_PEERCRED: " + err.Error()
					return
				}
				switch why, err := agentproc.MoreConfined(int(cred.Pid)); {
				case err != nil:
					answer = "error: " + err.Error()
				case why == "":
					answer = "free"
				default:
					answer = "confined: " + why
				}
			})
		}
		return answer + "\n"
	})
	return sock
}

// TestMoreConfinedSandboxedPeer is the library's half of row 6 of issue
// 37: a sandboxed tree that connects to a Unix socket is seen as confined
// by the listener (what agentproc serve refuses), as root and not; an
// unsandboxed one is not.
func TestMoreConfinedSandboxedPeer(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	sock := peerJudge(t)
	ws := t.TempDir()
	m := newManager(t)
	dial := func(sb *agentproc.Sandbox) string {
		req := helperRequest(t, "unixdial")
		req.Env[unixDialEnv] = sock
		req.WorkDir, req.Sandbox = ws, sb
		out := runSandboxed(t, m, req)
		return strings.TrimSpace(out.Text)
	}
	if got := dial(nil); got != "free" {
		t.Errorf("an unsandboxed tree: got %q, want free", got)
	}
	for _, n := range []agentproc.Network{agentproc.NetworkNone, agentproc.NetworkHost} {
		sb := agentproc.WorkspaceSandbox(ws)
		sb.Network = n
		got := dial(sb)
		t.Logf("network %s: %s", n, got)
		if !strings.HasPrefix(got, "confined: ") {
			t.Errorf("a tree sandboxed with network %s: got %q, want it confined", n, got)
		}
	}
	if why, err := agentproc.MoreConfined(os.Getpid()); why != "" || err != nil {
		t.Errorf("MoreConfined(self) = %q, %v; want \"\", nil", why, err)
	}
	// What cannot be judged is refused: no such process.
	for _, pid := range []int{0, -1, 1 << 30} {
		if why, err := agentproc.MoreConfined(pid); why == "" || err != nil {
			t.Errorf("MoreConfined(%d) = %q, %v; want a reason (no such process)", pid, why, err)
		}
	}
}
