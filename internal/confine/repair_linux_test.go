package confine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/osthread"
)

// readInNamespace reads p in the mount namespace ns, on a throwaway thread.
func readInNamespace(ns int, p string) (string, error) {
	var data []byte
	err := osthread.Throwaway(func() error {
		if err := EnterMountns(ns); err != nil {
			return err
		}
		var err error
		data, err = os.ReadFile(p)
		return err
	})
	return string(data), err
}

// TestLiveRepair checks, as root, that a namespace made live is repaired
// while it is in use: a hidden file made after it was made (an inotify
// event), a covered one replaced by a rename (a mount event: the cover is
// detached), and a covered one removed and made again are covered again,
// each within a few milliseconds; it
// logs the latencies, from the host's change to the end of the pass that
// covered it. Each round has a namespace and a repairer of its own, so
// that the rate limit (a burst of repairBurst) is not what is measured.
func TestLiveRepair(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a mount namespace)")
	}
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0); err != nil {
		t.Fatal(err)
	}
	const rounds = 10
	var lat [2][]time.Duration
	for i := range rounds {
		made := filepath.Join(home, "made"+strconv.Itoa(i))
		replaced := filepath.Join(home, "old"+strconv.Itoa(i))
		if err := os.WriteFile(replaced, []byte("OLD"), 0o600); err != nil {
			t.Fatal(err)
		}
		ml, rl := liveRepairRound(t, MountSpec{Hide: []string{made, replaced}, Empty: empty}, made, replaced)
		lat[0], lat[1] = append(lat[0], ml), append(lat[1], rl)
	}
	for k, name := range []string{"made (inotify)", "replaced by rename (mount event)"} {
		slices.Sort(lat[k])
		t.Logf("%s: covered in median %v, 90th percentile %v, max %v over %d rounds",
			name, lat[k][rounds/2], lat[k][rounds*9/10], lat[k][rounds-1], rounds)
	}
}

// liveRepairRound makes spec's namespace live, then makes the file made
// and renames a new file over replaced, and returns how long each took to
// be covered in the namespace.
func liveRepairRound(t *testing.T, spec MountSpec, made, replaced string) (madeLat, replacedLat time.Duration) {
	t.Helper()
	passes := make(chan int, 64)
	d := &DirWatcher{afterPass: func(n int, err error) {
		if err != nil && !errors.Is(err, errGone) { // errGone: a rename in progress, looked at again
			t.Errorf("repair pass: %v", err)
		}
		passes <- n
	}}
	defer d.Close()
	w := NewMountWatch(spec, d)
	defer w.Close()
	v, err := MakeMountns(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := w.Live(&v, spec); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	// waitMount waits for a pass that made a mount.
	waitMount := func(what string) {
		t.Helper()
		for {
			select {
			case n := <-passes:
				if n > 0 {
					return
				}
			case <-deadline:
				t.Fatalf("no repair pass covered %s within 10 s", what)
			}
		}
	}
	select { // the first pass, made at once: nothing to cover
	case <-passes:
	case <-deadline:
		t.Fatal("no first pass")
	}
	start := time.Now()
	if err := os.WriteFile(made, []byte("MADE-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitMount(made)
	madeLat = time.Since(start)

	tmp := replaced + ".lock"
	if err := os.WriteFile(tmp, []byte("NEW-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := os.Rename(tmp, replaced); err != nil {
		t.Fatal(err)
	}
	waitMount(replaced)
	replacedLat = time.Since(start)
	for _, p := range []string{made, replaced} {
		if got, err := readInNamespace(v.NS, p); err != nil || strings.Contains(got, "SECRET") {
			t.Errorf("read %s in the namespace: got %q, %v; want the empty cover", p, got, err)
		}
	}

	// Removed (its cover goes: a pass finds it missing and watches for
	// it), then made again.
	if err := os.Remove(made); err != nil {
		t.Fatal(err)
	}
	select {
	case <-passes:
	case <-deadline:
		t.Fatal("no pass after a covered file was removed")
	}
	if err := os.WriteFile(made, []byte("AGAIN-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitMount(made + " made again")
	if got, err := readInNamespace(v.NS, made); err != nil || strings.Contains(got, "SECRET") {
		t.Errorf("read %s made again in the namespace: got %q, %v; want the empty cover", made, got, err)
	}
	return madeLat, replacedLat
}

// TestRepairRateLimit checks that a repairer runs a burst of passes at
// once and then no more than repairRate a second: a tree that makes
// events in a loop cannot have the host spend more than that on repairs.
func TestRepairRateLimit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clock := quartz.NewMock(t)
	r := &repairer{clock: clock, tokens: repairBurst, filled: clock.Now(), closing: make(chan struct{})}
	for i := range repairBurst {
		if !r.take() {
			t.Fatalf("pass %d of the burst refused", i)
		}
	}
	trap := clock.Trap().NewTimer("repair", "rate")
	defer trap.Close()
	took := make(chan bool, 1)
	go func() { took <- r.take() }()
	call := trap.MustWait(ctx)
	if want := time.Second / repairRate; call.Duration != want {
		t.Errorf("the pass after the burst waits %v, want %v", call.Duration, want)
	}
	call.MustRelease(ctx)
	select {
	case <-took:
		t.Fatal("the pass after the burst ran before its wait")
	default:
	}
	clock.Advance(time.Second / repairRate).MustWait(ctx)
	select {
	case ok := <-took:
		if !ok {
			t.Fatal("the pass after the wait was refused")
		}
	case <-ctx.Done():
		t.Fatal("the pass after the wait never ran")
	}
	// Closing ends a wait at once.
	go func() { took <- r.take() }()
	trap.MustWait(ctx).MustRelease(ctx)
	close(r.closing)
	select {
	case ok := <-took:
		if ok {
			t.Error("a wait ended by closing: took a token, want refused")
		}
	case <-ctx.Done():
		t.Fatal("closing did not end the wait")
	}
}

// TestLiveRepairWatchesUsedUp checks, as root, that a hidden path whose
// directory appears while a tree runs stays hidden when that directory
// cannot be watched: a root tree shares inotify's per-user limit on
// watches (fs.inotify.max_user_watches) with the host, and used it up
// (watching /usr from two instances), so that the pass that found
// ~/.config made could not watch it for gh, and ~/.config/gh/hosts.yml
// made next was read by the running tree. The directory that cannot be
// watched is now covered whole (coverSet.withBlind). The limit is stood
// for by a failing inotify_add_watch for that directory (using up the
// real one would fail every root process's watches on the machine).
func TestLiveRepairWatchesUsedUp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a mount namespace)")
	}
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(home, ".config")
	secret := filepath.Join(config, "gh", "hosts.yml")
	spec := MountSpec{Hide: []string{filepath.Dir(secret)}, Write: []string{filepath.Join(dir, "ws")}, Empty: empty}
	passes := make(chan int, 64)
	d := &DirWatcher{
		afterPass: func(n int, err error) {
			if err != nil && !errors.Is(err, errGone) {
				t.Errorf("repair pass: %v", err)
			}
			passes <- n
		},
		addWatch: func(ino int, dir string, mask uint32) (int, error) {
			if _, err := os.Stat(dir); err == nil && dir == config {
				return -1, unix.ENOSPC // the user's watches used up
			}
			return unix.InotifyAddWatch(ino, dir, mask)
		},
	}
	defer d.Close()
	w := NewMountWatch(spec, d)
	defer w.Close()
	v, err := MakeMountns(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := w.Live(&v, spec); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	next := func(what string) {
		t.Helper()
		select {
		case <-passes:
		case <-deadline:
			t.Fatalf("no repair pass %s within 10 s", what)
		}
	}
	next("at first")
	if err := os.Mkdir(config, 0o755); err != nil {
		t.Fatal(err)
	}
	next("after ~/.config was made")
	if err := os.MkdirAll(filepath.Dir(secret), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("oauth_token: GH-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readInNamespace(v.NS, secret); err == nil || strings.Contains(got, "SECRET") {
		t.Errorf("read %s in the namespace, its directory unwatched: got %q, %v; want it hidden", secret, got, err)
	}
	// Control: the host reads it.
	if got, err := os.ReadFile(secret); err != nil || !strings.Contains(string(got), "SECRET") {
		t.Fatalf("control: the host read %q, %v", got, err)
	}
}
