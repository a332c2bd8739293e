package agentproc_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// Tests of the sixth attack review: docs/sandbox-threats.md, "Sixth attack
// review".

// TestAttackDeviceMadeBeforeRemake: as root a policy's Landlock ruleset
// leaves out the host's devices (confine.HostDevices, a list read when
// the policy is built) and grants /dev entry by entry, so that a device
// made later has no rule. But the shared ruleset is made again every 512
// own-dir rules (confine.LandlockShared), and that making granted /dev's
// entries as they were then, less the list of the build: a block device
// made between the build and the remaking (a loop device losetup adds, a
// disk plugged in) was readable from then on, by the tree's uid 0, the
// device's owner. Now the making of the rules leaves out every host device
// it meets, whatever the list says. The controls: the host reads the
// secret through the device; a tree before the remaking is refused it; and
// a file made after the build, in a directory above a hidden path, shows
// when the remaking has happened.
func TestAttackDeviceMadeBeforeRemake(t *testing.T) {
	requireRootSandbox(t)
	if testing.Short() {
		t.Skip("600 sandboxed Starts")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("no losetup")
	}
	ws, key, _ := sandboxWorkspace(t)
	const secret = "HIDDEN-ON-DISK-3f9a"
	img := filepath.Join(filepath.Dir(key), "disk.img")
	data := make([]byte, 1<<20)
	copy(data[4096:], secret)
	if err := os.WriteFile(img, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", "-r", img).CombinedOutput()
	if err != nil {
		t.Skipf("losetup: %v: %s", err, out)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", loop).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", loop, err, out)
		}
	})
	var st unix.Stat_t
	if err := unix.Stat(loop, &st); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithRedaction(false))
	runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: "true"}) // the policy built

	// A device made after the build: a node of the same loop device, as
	// losetup makes /dev/loop8 when loop0-7 are taken.
	dev := "/dev/agentproc-atk6-" + strconv.Itoa(os.Getpid())
	if err := unix.Mknod(dev, unix.S_IFBLK|0o600, int(st.Rdev)); err != nil {
		t.Skipf("mknod %s: %v", dev, err)
	}
	t.Cleanup(func() { _ = os.Remove(dev) })
	if b, err := os.ReadFile(dev); err != nil || !bytes.Contains(b, []byte(secret)) {
		t.Fatalf("control: the host read %d bytes of %s (err %v), want the secret in them", len(b), dev, err)
	}
	// A file made after the build, next to a hidden one: granted from the
	// remaking on, which it tells.
	later := filepath.Join(filepath.Dir(filepath.Dir(key)), "later")
	if err := os.WriteFile(later, []byte("REMADE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := "cat " + shellQuote(later) + " 2>/dev/null; grep -a -o " + secret + " " + dev + " 2>/dev/null; true"
	if o := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: cmd}); strings.Contains(o.Text, secret) || strings.Contains(o.Text, "REMADE") {
		t.Fatalf("control: before the remaking the tree read %q, want neither the later file nor the device", o.Text)
	}
	remade := false
	for i := 0; i < 600 && !remade; i++ {
		o := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: cmd})
		remade = strings.Contains(o.Text, "REMADE")
		if strings.Contains(o.Text, secret) {
			t.Fatalf("Start %d: the tree read the disk through %s, a device made after the policy's build: output %q, want it refused", i+2, dev, o.Text)
		}
	}
	if !remade {
		t.Fatal("control: after 600 Starts the later file was still refused; want the ruleset made again (every 512 own-dir rules)")
	}
}
