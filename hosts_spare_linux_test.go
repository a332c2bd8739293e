package agentproc_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// TestSandboxHostsSpareConfinedAhead: after two NetworkHosts Starts of a
// policy in a row, the spare thread made for the next one is confined
// already (no_new_privs and the seccomp filter), its proxy listener made
// ahead in the tree's network namespace, so that the Start only forks; the
// tree it starts reaches its own proxy, which refuses an unlisted host and
// records the denial on that tree. Not parallel: it counts spare Starts
// process-wide.
func TestSandboxHostsSpareConfinedAhead(t *testing.T) {
	requireHosts(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	m := newManager(t)
	req := hostsRequest(t, hostsSandbox(t, "example.com"), "curl -sS https://"+refusedHost+"/")
	for i := 0; ; i++ {
		runSandboxed(t, m, req)
		if agentproc.SpareReady(m, 10*time.Second) {
			break
		}
		if i == 4 {
			t.Fatalf("got no spare thread ready after %d NetworkHosts Starts in a row, want one", i+1)
		}
	}
	tid := agentproc.SpareThreadID(m)
	data, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NoNewPrivs:\t1\n", "Seccomp:\t2\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("spare thread %d before its Start: got no %q in its status, want it confined ahead", tid, strings.TrimSpace(want))
		}
	}
	before := agentproc.SpareStarts()
	out := runSandboxed(t, m, req)
	if agentproc.SpareStarts() == before {
		t.Error("the Start after the spare was ready did not take it")
	}
	want := agentproc.Denial{Kind: "network", Op: "connect", Target: refusedHost + ":443", Rule: "not in AllowHosts", Count: 1}
	if len(out.Denials) != 1 || out.Denials[0] != want {
		t.Errorf("denials of the tree started from the spare: got %+v (output %q), want [%+v]", out.Denials, out.Text, want)
	}
}
