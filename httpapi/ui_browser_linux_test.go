package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// uiScreenshot, when set, is where TestUIBrowser/screenshot writes the
// picture of the page in docs/http.md (the repository's docs/ui.png):
//
//	go test ./httpapi -run TestUIBrowser/screenshot -ui.screenshot ../docs/ui.png
var uiScreenshot = flag.String("ui.screenshot", "", "write the page's screenshot to this PNG file")

// uiRowWithin is how soon after its started event a process's row must be
// on the page.
const uiRowWithin = time.Second

// newBrowser starts a headless Chromium for one test, or skips the test
// where Debian's chromium package is not installed. The browser, and every
// process it started, is gone when the test ends: the allocator stops it,
// then any process still running with this test's user data directory on
// its command line is killed (a renderer or zygote can outlive the browser
// when it is killed) and the test fails if one survives.
// browserTimeout bounds each step in the browser. It is longer than
// testTimeout: under make stress (the race detector, two CPU burners and
// the rest of the suite) one click-confirm-wait chain in Chromium took
// over 10 s. It is a way out of a hung step, not an assertion: the
// 1 s bounds the issue sets are checked on their own.
const browserTimeout = 45 * time.Second

func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skipf("chromium is not installed (bash .ci/install-test-deps.sh installs it): %v", err)
	}
	dir := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(dir),
		chromedp.Flag("headless", true),
		// Root in a container: no user namespace for the sandbox.
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 860),
	)
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		stopCtx, stop := context.WithTimeout(ctx, testTimeout)
		defer stop()
		if err := chromedp.Cancel(stopCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("close browser: %v", err)
		}
		cancel()
		allocCancel()
		if n := killBrowserLeftovers(t, dir); n > 0 {
			t.Logf("killed %d browser processes left after the browser exited", n)
		}
	})
	// The first Run starts the browser, on the browser's own context, so
	// that a subtest's deadline does not end it.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start chromium: %v", err)
		}
	case <-time.After(3 * testTimeout):
		t.Fatal("chromium did not start")
	}
	return ctx
}

// killBrowserLeftovers kills the processes whose command line carries
// --user-data-dir=dir (every process of the browser this test started has
// it, and dir is this test's own temporary directory, so they are ours) until
// none is left, and returns how many it killed.
func killBrowserLeftovers(t *testing.T, dir string) int {
	t.Helper()
	want := []byte("--user-data-dir=" + dir + "\x00")
	killed := 0
	deadline := time.Now().Add(testTimeout)
	for quiet := 0; quiet < 3; {
		found := 0
		entries, err := os.ReadDir("/proc")
		if err != nil {
			t.Errorf("read /proc: %v", err)
			return killed
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !bytes.Contains(cmdline, want) {
				continue
			}
			found++
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		if found == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if time.Now().After(deadline) {
			t.Errorf("browser processes with %s still running after %v", dir, testTimeout)
			return killed
		}
		if found > 0 || quiet < 3 {
			// A killed process is a zombie until its parent reaps it;
			// look again shortly, a bounded number of times.
			time.Sleep(10 * time.Millisecond)
		}
	}
	return killed
}

// page is one browser tab on a test server's page.
type page struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions and console errors
}

// openPage opens url in a new tab of browser and, when live is set, waits
// until the page's event stream is live. The tab is closed at the end of
// the test, which fails if the page threw an exception or logged an error
// (a Content Security Policy violation is one), unless allowProblems was
// called.
func openPage(t *testing.T, browser context.Context, url string, live bool) *page {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	p := &page{t: t, ctx: tab}
	// The first Do opens the tab, on the tab's own context.
	if err := chromedp.Do(tab); err != nil {
		cancel()
		t.Fatalf("open tab: %v", err)
	}
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range chromedp.Console(tab) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				p.problem(m.String())
			}
		}
	}()
	t.Cleanup(func() {
		if err := chromedp.Cancel(tab); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("close tab: %v", err)
		}
		cancel()
		<-consoleDone
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, pr := range p.problems {
			t.Errorf("page: %s", pr)
		}
	})
	p.run(chromedp.Navigate(url))
	if live {
		p.run(chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)))
	}
	return p
}

func (p *page) problem(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.problems = append(p.problems, s)
}

// allowProblems forgets the errors the page logged so far.
func (p *page) allowProblems() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.problems = nil
}

// run runs actions in the tab with the test deadline, failing the test on
// an error.
func (p *page) run(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserTimeout)
	defer cancel()
	// One at a time, so that a failure says which step it was.
	for i, a := range actions {
		if err := chromedp.Do(ctx, a); err != nil {
			p.t.Fatalf("browser, step %d of %d: %v", i+1, len(actions), err)
		}
	}
}

// try runs one action in the tab with the test deadline and returns its
// error, for a caller that says more about a failure than run does.
func (p *page) try(a chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(p.ctx, browserTimeout)
	defer cancel()
	return chromedp.Do(ctx, a)
}

// get runs one action that returns a value.
func get[T any](p *page, a chromedp.Action[T]) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		p.t.Fatalf("browser: %v", err)
	}
	return v
}

// text returns the text of the first element matching sel.
func (p *page) text(sel chromedp.CSS) string {
	p.t.Helper()
	return get(p, chromedp.TextContent(sel))
}

// waitJS waits until the JavaScript expression is true.
func (p *page) waitJS(expr string) {
	p.t.Helper()
	get(p, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(10*time.Millisecond)))
}

// waitComm waits until the process pid runs the program named comm (its
// exec is done), reading /proc/PID/comm; it fails the test after
// testTimeout.
func waitComm(t *testing.T, pid int, comm string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err == nil && strings.TrimSpace(string(b)) == comm {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d never ran %s (comm %q, %v)", pid, comm, b, err)
		}
		<-tick.C
	}
}

func rowSel(id string) chromedp.CSS { return chromedp.CSS(`#rows tr[data-id="` + id + `"]`) }

// waitStarted returns the started event of id from events.
func waitStarted(t *testing.T, ctx context.Context, events <-chan agentproc.Event, id string) agentproc.Event {
	t.Helper()
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("event stream ended")
			}
			if e.Type == agentproc.EventStarted && e.ID == id {
				return e
			}
		case <-ctx.Done():
			t.Fatalf("no started event for %s: %v", id, ctx.Err())
		}
	}
}

// startUnowned starts req as the empty owner, the one a page without
// credentials acts for.
func startUnowned(t *testing.T, ts *testServer, req agentproc.Request) *agentproc.Process {
	t.Helper()
	p, err := ts.m.Start(testContext(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUIBrowser drives the page in headless Chromium against a real
// handler with real processes. One browser serves every subtest, each in
// its own tab on its own server.
func TestUIBrowser(t *testing.T) {
	browser := newBrowser(t)

	t.Run("row appears within 1s of its start event", func(t *testing.T) {
		ts := newTestServer(t, nil, nil, httpapi.WithUI())
		pg := openPage(t, browser, ts.srv.URL+"/", true)
		ctx := testContext(t)
		events := ts.m.Subscribe(ctx)
		p := startUnowned(t, ts, agentproc.Request{Command: "sleep 30"})
		e := waitStarted(t, ctx, events, p.ID())
		pg.run(chromedp.WaitVisible(rowSel(p.ID())))
		d := time.Since(e.Time)
		if d > uiRowWithin {
			t.Errorf("row of %s visible %v after its started event, want within %v", p.ID(), d, uiRowWithin)
		}
		t.Logf("row visible %v after the started event", d)
		if got := pg.text(rowSel(p.ID()) + " .state"); got != "running" {
			t.Errorf("state: got %q, want running", got)
		}
		if got := get(pg, chromedp.Title()); got != "agentproc (1 running)" {
			t.Errorf("title: got %q, want agentproc (1 running)", got)
		}
		if got := pg.text(rowSel(p.ID()) + " .cmd-btn"); got != "sleep 30" {
			t.Errorf("command: got %q, want %q", got, "sleep 30")
		}
		if got := pg.text(rowSel(p.ID()) + " .id"); got != p.ID()[:8] {
			t.Errorf("ID column: got %q, want the short ID %q, as agentproc ps shows it", got, p.ID()[:8])
		}
	})

	t.Run("exit changes the row without a reload", func(t *testing.T) {
		ts := newTestServer(t, nil, nil, httpapi.WithUI())
		pg := openPage(t, browser, ts.srv.URL+"/", true)
		p := startUnowned(t, ts, agentproc.Request{Command: "read line; echo got $line; exit 3", Stdin: true})
		pg.run(chromedp.WaitVisible(rowSel(p.ID()) + `[data-state="running"]`))
		get(pg, chromedp.Evaluate[bool](`window.sameDocument = true`))
		if _, err := p.WriteStdin(testContext(t), []byte("go\n")); err != nil {
			t.Fatal(err)
		}
		pg.run(chromedp.WaitVisible(rowSel(p.ID()) + `[data-state="exited"]`))
		if got := pg.text(rowSel(p.ID()) + " .state"); got != "exited 3" {
			t.Errorf("state: got %q, want %q", got, "exited 3")
		}
		if !get(pg, chromedp.Evaluate[bool](`window.sameDocument === true`)) {
			t.Error("the page was reloaded")
		}
		if got := pg.text(rowSel(p.ID()) + " .cpu"); got == "" {
			t.Error("no CPU time after exit")
		}
	})

	t.Run("a running row shows live CPU and memory", func(t *testing.T) {
		ts := newTestServer(t, nil, nil, httpapi.WithUI())
		pg := openPage(t, browser, ts.srv.URL+"/", true)
		p := startUnowned(t, ts, agentproc.Request{Command: "while :; do :; done"})
		pg.run(chromedp.WaitVisible(rowSel(p.ID()) + `[data-state="running"]`))
		cell := func(c string) string {
			return `document.querySelector('` + string(rowSel(p.ID())) + ` .` + c + `').textContent`
		}
		// The snapshot or the first "usage" event fills both cells; a later
		// one moves the CPU time on.
		pg.waitJS(cell("cpu") + ` !== '' && /iB$/.test(` + cell("mem") + `)`)
		first := pg.text(rowSel(p.ID()) + " .cpu")
		pg.waitJS(cell("cpu") + ` !== '` + first + `'`)
		t.Logf("CPU %s, then %s; memory %s", first, pg.text(rowSel(p.ID())+" .cpu"), pg.text(rowSel(p.ID())+" .mem"))
	})

	t.Run("a hidden page reads no usage and refreshes it when shown", func(t *testing.T) {
		// The queries of the page's GET /ui/events, in order.
		queries := make(chan string, 16)
		ts := newTestServer(t, nil, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/ui/events" {
					select {
					case queries <- r.URL.RawQuery:
					default:
						t.Errorf("more than %d GET /ui/events, want one per change of visibility", cap(queries))
					}
				}
				h.ServeHTTP(w, r)
			})
		}, httpapi.WithUI())
		pg := openPage(t, browser, ts.srv.URL+"/", true)
		nextQuery := func(want string) {
			t.Helper()
			select {
			case q := <-queries:
				if q != want {
					t.Fatalf("GET /ui/events?%s, want ?%s", q, want)
				}
			case <-time.After(browserTimeout):
				t.Fatalf("no GET /ui/events?%s within %v", want, browserTimeout)
			}
		}
		nextQuery("") // the page opened visible
		p := startUnowned(t, ts, agentproc.Request{Command: "while :; do :; done"})
		cpu := `document.querySelector('` + string(rowSel(p.ID())) + ` .cpu').textContent`
		pg.waitJS(`document.querySelector('` + string(rowSel(p.ID())) + `') !== null && ` + cpu + ` !== ''`)

		// Minimizing its window hides the page in headless Chromium, as
		// switching away from its tab does in a browser with a screen.
		win, err := chromedp.Call(pg.ctx, cdpbrowser.GetWindowForTarget, cdpbrowser.GetWindowForTargetParams{})
		if err != nil {
			t.Fatal(err)
		}
		setWindow := func(state cdpbrowser.WindowState) {
			t.Helper()
			ctx, cancel := context.WithTimeout(pg.ctx, browserTimeout)
			defer cancel()
			if _, err := chromedp.Call(ctx, cdpbrowser.SetWindowBounds, cdpbrowser.SetWindowBoundsParams{
				WindowID: win.WindowID, Bounds: &cdpbrowser.Bounds{WindowState: state},
			}); err != nil {
				t.Fatal(err)
			}
		}
		setWindow(cdpbrowser.WindowStateMinimized)
		pg.waitJS(`document.hidden`)
		nextQuery("usage=0")
		pg.run(chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)))
		// The figures shown before stay, not blanked by a snapshot without.
		hidden := pg.text(rowSel(p.ID()) + " .cpu")
		if hidden == "" {
			t.Error("CPU time blank while hidden, want the last figure kept")
		}

		// Shown again: a stream with usage at once, whose snapshot moves the
		// burner's CPU time on without waiting for a "usage" event.
		setWindow(cdpbrowser.WindowStateNormal)
		pg.waitJS(`!document.hidden`)
		nextQuery("")
		pg.waitJS(cpu + ` !== '` + hidden + `'`)
		t.Logf("CPU %s while hidden, %s once shown", hidden, pg.text(rowSel(p.ID())+" .cpu"))
	})

	t.Run("output pane follows a command printing for 3s, in colour", func(t *testing.T) {
		ts := newTestServer(t, nil, nil, httpapi.WithUI())
		pg := openPage(t, browser, ts.srv.URL+"/", true)
		// 60 lines, one each 50 ms: more than the pane shows at once.
		p := startUnowned(t, ts, agentproc.Request{
			Command: `i=1; while [ $i -le 60 ]; do printf '\033[32mline\033[0m %d\n' $i; i=$((i+1)); sleep 0.05; done`,
		})
		pg.run(chromedp.Click(rowSel(p.ID()) + " .cmd-btn"))
		pg.waitJS(`document.getElementById('out').textContent.includes('line 5\n')`)
		if info := p.Info(); !info.Running {
			t.Fatalf("the command had ended when line 5 was shown (%s); the test needs it running", info.Reason)
		}
		pg.waitJS(`document.getElementById('out').dataset.eof === 'true'`)
		var want strings.Builder
		for i := 1; i <= 60; i++ {
			fmt.Fprintf(&want, "line %d\n", i)
		}
		if got := pg.text("#out"); got != want.String() {
			t.Errorf("output pane:\n%q\nwant (rendered, each line once):\n%q", got, want.String())
		}
		// The colours are kept: each "line" in the green of SGR 32.
		green := get(pg, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#out span.sgr')].map((e) => e.textContent + ' ' + getComputedStyle(e).color)`))
		if len(green) != 60 || green[0] != "line rgb(0, 205, 0)" {
			t.Errorf("coloured spans: got %d, first %q; want 60, each %q", len(green), green, "line rgb(0, 205, 0)")
		}
		if !get(pg, chromedp.Evaluate[bool](`(() => { const o = document.getElementById('out'); return o.scrollHeight > o.clientHeight && o.scrollHeight - o.scrollTop - o.clientHeight < 4; })()`)) {
			t.Error("the output pane overflows but is not scrolled to the end")
		}
		// Scrolling up to read stops following.
		get(pg, chromedp.Evaluate[bool](`document.getElementById('out').scrollTop = 0, true`))
		pg.waitJS(`!document.getElementById('follow').checked`)
		pg.run(chromedp.WaitVisible(rowSel(p.ID()) + `[data-state="exited"]`))
		if got := pg.text("#out-state"); !strings.Contains(got, "exited 0") {
			t.Errorf("output state: got %q, want it to say exited 0", got)
		}
	})

	t.Run("a prompt is answered from the page", func(t *testing.T) {
		ts := newTestServer(t, nil, nil, httpapi.WithUI())
		pg := openPage(t, browser, ts.srv.URL+"/", true)
		p := startUnowned(t, ts, agentproc.Request{Command: `printf 'name? '; read n; echo "hello $n"`, Stdin: true})
		pg.run(chromedp.Click(rowSel(p.ID()) + " .cmd-btn"))
		pg.run(chromedp.WaitVisible(chromedp.CSS(`#answer-text`)))
		pg.run(
			chromedp.SendKeys(chromedp.CSS(`#answer-text`), "ada"),
			chromedp.Click(chromedp.CSS(`#answer button[type="submit"]`)),
		)
		pg.waitJS(`document.getElementById('out').textContent.includes('hello ada')`)
		pg.run(chromedp.WaitVisible(rowSel(p.ID()) + `[data-state="exited"]`))
		if !get(pg, chromedp.Evaluate[bool](`document.getElementById('answer').hidden`)) {
			t.Error("the answer form is still shown after the process exited")
		}
	})

	t.Run("selecting another row shows only its output", func(t *testing.T) {
		ts := newTestServer(t, nil, nil, httpapi.WithUI())
		pg := openPage(t, browser, ts.srv.URL+"/", true)
		// a keeps writing while b is selected.
		a := startUnowned(t, ts, agentproc.Request{Command: `while :; do echo from-a; sleep 0.01; done`})
		b := startUnowned(t, ts, agentproc.Request{Command: `echo from-b; sleep 60`})
		pg.run(chromedp.Click(rowSel(a.ID()) + " .cmd-btn"))
		pg.waitJS(`document.getElementById('out').textContent.includes('from-a')`)
		// Clicked from the page's own script: a's rows re-render while it
		// writes, and a click by coordinates can land on the row that was
		// there a moment before (seen under load in make stress).
		pg.waitJS(`(r => (r.querySelector('.cmd-btn').click(), r.getAttribute('aria-current') === 'true'))(document.querySelector('` + string(rowSel(b.ID())) + `'))`)
		pg.waitJS(`document.getElementById('out').textContent === 'from-b\n'`)
		// Let a's writes go on past b's output; none may reach the pane.
		pg.waitJS(`document.querySelector('` + string(rowSel(b.ID())) + `').getAttribute('aria-current') === 'true'`)
		if _, err := a.Stop(testContext(t)); err != nil {
			t.Fatal(err)
		}
		pg.run(chromedp.WaitVisible(rowSel(a.ID()) + `[data-state="exited"]`))
		if got := pg.text("#out"); got != "from-b\n" {
			t.Errorf("pane after switching: got %q, want only b's output", got)
		}
	})

	t.Run("stop button ends a sleep and the row says so", func(t *testing.T) {
		ts := newTestServer(t, nil, nil, httpapi.WithUI())
		pg := openPage(t, browser, ts.srv.URL+"/", true)
		p := startUnowned(t, ts, agentproc.Request{Command: "sleep 60"})
		pg.run(
			chromedp.WaitVisible(rowSel(p.ID())+`[data-state="running"]`),
			chromedp.Click(rowSel(p.ID())+" button.stop"),
			chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
		)
		if got := pg.text("#confirm-text"); !strings.Contains(got, "sleep 60") {
			t.Errorf("confirmation: got %q, want it to name the command", got)
		}
		pg.run(chromedp.Click(chromedp.CSS(`#confirm-ok`)))
		pg.run(chromedp.WaitVisible(rowSel(p.ID()) + `[data-state="exited"]`))
		if got := pg.text(rowSel(p.ID()) + " .state"); !strings.HasPrefix(got, "killed") {
			t.Errorf("state: got %q, want killed", got)
		}
		info := p.Info()
		if info.Running || info.Reason != agentproc.ReasonKilled {
			t.Errorf("process: running %v reason %q, want exited, killed", info.Running, info.Reason)
		}
	})

	t.Run("cancel in the confirmation stops nothing", func(t *testing.T) {
		ts := newTestServer(t, nil, nil, httpapi.WithUI())
		pg := openPage(t, browser, ts.srv.URL+"/", true)
		p := startUnowned(t, ts, agentproc.Request{Command: "sleep 60"})
		pg.run(
			chromedp.WaitVisible(rowSel(p.ID())+`[data-state="running"]`),
			chromedp.Click(chromedp.CSS(`#stop-all`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
			chromedp.Click(chromedp.CSS(`#confirm-cancel`)),
			chromedp.WaitNotPresent(chromedp.CSS(`#confirm[open]`)),
		)
		if !p.Info().Running {
			t.Error("the process stopped after Cancel")
		}
	})

	t.Run("an owner sees only its own rows", func(t *testing.T) {
		tokens := map[string]string{"Bearer tok-alice": "alice", "Bearer tok-bob": "bob"}
		ts := newTestServer(t, nil, nil, httpapi.WithUI(), httpapi.WithAuthorize(func(r *http.Request) (string, error) {
			if owner, ok := tokens[r.Header.Get("Authorization")]; ok {
				return owner, nil
			}
			return "", errors.New("no valid bearer token")
		}))
		ctx := testContext(t)
		alice, bob := ts.m.Scope("alice"), ts.m.Scope("bob")
		start := func(s *agentproc.Scope, cmd string) *agentproc.Process {
			p, err := s.Start(ctx, agentproc.Request{Command: cmd})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		a1 := start(alice, "sleep 61")
		b1 := start(bob, "sleep 62")

		pg := openPage(t, browser, ts.srv.URL+"/#token=tok-alice", true)
		pg.run(chromedp.WaitVisible(rowSel(a1.ID())))
		// The token left the address bar.
		if hash := get(pg, chromedp.Evaluate[string](`location.hash`)); hash != "" {
			t.Errorf("location.hash %q after load, want the token removed", hash)
		}
		// Bob's second process starts before Alice's second: once
		// Alice's is shown, Bob's event would have come first.
		b2 := start(bob, "sleep 63")
		a2 := start(alice, "sleep 64")
		pg.run(chromedp.WaitVisible(rowSel(a2.ID())))
		ids := get(pg, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#rows tr')].map(tr => tr.dataset.id)`))
		if len(ids) != 2 || !contains(ids, a1.ID()) || !contains(ids, a2.ID()) {
			t.Errorf("rows %v, want exactly alice's %s and %s (bob's: %s, %s)", ids, a1.ID(), a2.ID(), b1.ID(), b2.ID())
		}
		if got := pg.text(rowSel(a1.ID()) + " .owner"); got != "alice" {
			t.Errorf("owner: got %q, want alice", got)
		}

		// Stop all stops Alice's processes only.
		pg.run(
			chromedp.Click(chromedp.CSS(`#stop-all`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
		)
		if got := pg.text("#confirm-text"); !strings.Contains(got, "2 running") || !strings.Contains(got, "alice") {
			t.Errorf("confirmation: got %q, want 2 running processes of alice", got)
		}
		pg.run(
			chromedp.Click(chromedp.CSS(`#confirm-ok`)),
			chromedp.WaitVisible(rowSel(a1.ID())+`[data-state="exited"]`),
			chromedp.WaitVisible(rowSel(a2.ID())+`[data-state="exited"]`),
		)
		if !b1.Info().Running || !b2.Info().Running {
			t.Error("stop all on alice's page stopped bob's processes")
		}

		// Without a token the page shows the API's refusal and no row.
		noToken := openPage(t, browser, ts.srv.URL+"/", false)
		noToken.run(chromedp.WaitVisible(chromedp.CSS(`#error`)))
		if got := noToken.text("#error"); !strings.Contains(got, "no valid bearer token") || !strings.Contains(got, "#token=TOKEN") {
			t.Errorf("error shown without a token: got %q, want the hook's reason and how to open the page", got)
		}
		// Retrying cannot help: the page says what it needs instead of
		// "Reconnecting…" forever.
		noToken.waitJS(`document.getElementById('conn').textContent === 'Needs the token'`)
		if rows := get(noToken, chromedp.Evaluate[int](`document.querySelectorAll('#rows tr').length`)); rows != 0 {
			t.Errorf("%d rows without a token, want 0", rows)
		}
		// The 401 is logged by the browser as a failed load; that is the
		// page working, not a problem.
		noToken.allowProblems()
	})

	t.Run("under a prefix", func(t *testing.T) {
		ts := newTestServer(t, nil, func(h http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("/processes/", http.StripPrefix("/processes", h))
			return mux
		}, httpapi.WithUI())
		pg := openPage(t, browser, ts.srv.URL+"/processes/", true)
		// exec, and the click only once it is done: the shell becomes
		// sleep, whose SIGINT is the default. dash loses a SIGINT that
		// arrives while it is starting a command (between its vfork and
		// the child's exec) and goes on waiting for the child: under load
		// in CI the Interrupt came right then, and sleep ran its 60 s.
		p := startUnowned(t, ts, agentproc.Request{Command: "echo under a prefix; exec sleep 60"})
		pg.run(
			chromedp.WaitVisible(rowSel(p.ID())+`[data-state="running"]`),
			chromedp.Click(rowSel(p.ID())+" .cmd-btn"),
		)
		// The output shown before the interrupt: the stream works under
		// the prefix, the shell is past its echo, and the pane that the
		// click opened has settled before the next click is aimed.
		pg.waitJS(`document.getElementById('out').textContent === 'under a prefix\n'`)
		waitComm(t, p.Info().PID, "sleep")
		pg.run(
			chromedp.Click(rowSel(p.ID())+" button.interrupt"),
			chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
			chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		)
		if err := pg.try(chromedp.WaitVisible(rowSel(p.ID()) + `[data-state="exited"]`)); err != nil {
			info := p.Info()
			diag := get(pg, chromedp.Evaluate[string](`JSON.stringify({dialogOpen: document.getElementById('confirm').open, error: document.getElementById('error').textContent, row: (document.querySelector('#rows tr[data-id="`+p.ID()+`"]') || {}).outerHTML})`))
			t.Fatalf("the row never showed the exit: %v; server: running %v, reason %q, signal %q; page: %s", err, info.Running, info.Reason, info.ExitSignal, diag)
		}
		pg.waitJS(`document.getElementById('out').textContent === 'under a prefix\n'`)
		if info := p.Info(); info.Reason != agentproc.ReasonKilled || info.ExitSignal != "SIGINT" {
			t.Errorf("after Interrupt: reason %q signal %q, want killed by SIGINT", info.Reason, info.ExitSignal)
		}
	})

	t.Run("narrow window", func(t *testing.T) {
		ts := newTestServer(t, nil, nil, httpapi.WithUI())
		pg := openPage(t, browser, ts.srv.URL+"/", true)
		p := startUnowned(t, ts, agentproc.Request{Command: "sleep 30 # " + strings.Repeat("a-long-argument ", 8)})
		pg.run(
			chromedp.EmulateViewport(380, 700),
			chromedp.WaitVisible(rowSel(p.ID())),
		)
		overflow := get(pg, chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
		if overflow > 0 {
			t.Errorf("the page is %dpx wider than a 380px window", overflow)
		}
		// Every control has a name a screen reader can say.
		unnamed := get(pg, chromedp.Evaluate[[]string](`[...document.querySelectorAll('button, input, a')].filter(e => !(e.getAttribute('aria-label') || e.textContent.trim() || (e.labels && e.labels.length))).map(e => e.outerHTML)`))
		if len(unnamed) > 0 {
			t.Errorf("controls without an accessible name: %v", unnamed)
		}
		// The keyboard reaches the command and Enter selects it.
		pg.run(
			chromedp.Focus(rowSel(p.ID())+" .cmd-btn"),
			chromedp.KeyEvent("\r"),
		)
		pg.waitJS(`document.getElementById('out').dataset.id === ` + strconv.Quote(p.ID()))
	})

	t.Run("screenshot", func(t *testing.T) {
		uiScreenshotTest(t, browser)
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// uiScreenshotTest fills a page with a few typical processes, takes a
// screenshot, checks that it is not blank, and writes it where
// -ui.screenshot asks.
func uiScreenshotTest(t *testing.T, browser context.Context) {
	// Every request acts for the owner "agent", as behind a proxy that
	// authenticated the person watching it.
	ts := newTestServer(t, []agentproc.Option{agentproc.WithInputQuiet(100 * time.Millisecond)}, nil, httpapi.WithUI(),
		httpapi.WithAuthorize(func(*http.Request) (string, error) { return "agent", nil }))
	ctx := testContext(t)
	s := ts.m.Scope("agent")
	start := func(req agentproc.Request) *agentproc.Process {
		p, err := s.Start(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	failed := start(agentproc.Request{Command: `echo 'parse.go:41:6: declared and not used: n' >&2; exit 1`})
	ok := start(agentproc.Request{Command: "uname -sr"})
	stopped := start(agentproc.Request{Command: "sleep 300"})
	if _, err := stopped.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*agentproc.Process{failed, ok} {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	server := start(agentproc.Request{Command: "exec python3 -m http.server 0 --bind 127.0.0.1", Background: true})
	port, err := server.WaitPort(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A build under limits, where this host can enforce them (cgroup v2
	// with the controllers delegated), to show their badges.
	var limited *agentproc.Process
	if p, err := s.Start(ctx, agentproc.Request{
		Command: "sleep 300 # make -j4",
		Limits:  agentproc.Limits{Memory: 512 << 20, Procs: 64, CPU: 2},
	}); err == nil {
		limited = p
	} else if !errors.Is(err, agentproc.ErrUnsupported) {
		t.Fatal(err)
	} else {
		t.Logf("no limits badge in the screenshot: %v", err)
	}
	// A command confined to its workspace, where this host can sandbox,
	// to show the sandbox badge.
	var sandboxed *agentproc.Process
	if f := agentproc.SandboxSupport(); f.Supported {
		ws := t.TempDir()
		sandboxed = start(agentproc.Request{Command: "sleep 300 # npm test", WorkDir: ws, Sandbox: agentproc.WorkspaceSandbox(ws)})
	} else {
		t.Logf("no sandbox badge in the screenshot: %s", f)
	}
	asks := start(agentproc.Request{Command: `printf 'Overwrite config.yaml? [y/N] '; read answer`, Stdin: true})
	tests := start(agentproc.Request{
		Command: `echo "=== RUN   TestParse"; i=1; while :; do printf -- '--- PASS: TestCase%03d (0.0%ds)\n' $i $((i % 10)); i=$((i+1)); sleep 0.2; done`,
	})

	pg := openPage(t, browser, ts.srv.URL+"/", true)
	pg.run(
		chromedp.WaitVisible(rowSel(server.ID()) + ` .ports a`),
	)
	href := get(pg, chromedp.Evaluate[string](`document.querySelector('`+string(rowSel(server.ID()))+` .ports a').href`))
	if want := fmt.Sprintf("http://127.0.0.1:%d/", port.Port); href != want {
		t.Errorf("port link %q, want %q", href, want)
	}
	pg.waitJS(`document.querySelector('` + string(rowSel(asks.ID())) + ` .state').textContent === 'waiting for input'`)
	if sandboxed != nil {
		if got := pg.text(rowSel(sandboxed.ID()) + " .badges"); got != "sandbox, network none" {
			t.Errorf("sandbox badge: got %q, want %q", got, "sandbox, network none")
		}
	}
	if limited != nil {
		if got := pg.text(rowSel(limited.ID()) + " .badges"); got != "memory 512 MiBprocs 64cpu 2" {
			t.Errorf("limit badges: got %q, want memory 512 MiB, procs 64, cpu 2", got)
		}
	}
	pg.run(chromedp.Click(rowSel(tests.ID()) + " .cmd-btn"))
	pg.waitJS(`document.getElementById('out').textContent.includes('TestCase008')`)
	get(pg, chromedp.Evaluate[bool](`window.scrollTo(0, 0), true`))
	shot := get(pg, chromedp.CaptureScreenshot())

	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if colors := distinctColors(img); colors < 16 {
		t.Errorf("screenshot has %d distinct colours; a page with a table and output has many more", colors)
	}
	// Text contrast, in the light and the dark scheme (WCAG AA: 4.5:1).
	for _, scheme := range []string{"light", "dark"} {
		ctx, cancel := context.WithTimeout(pg.ctx, browserTimeout)
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if low := get(pg, chromedp.Evaluate[[]string](lowContrastJS)); len(low) > 0 {
			t.Errorf("%s scheme: text below 4.5:1 contrast: %v", scheme, low)
		}
	}
	if *uiScreenshot != "" {
		if err := os.WriteFile(*uiScreenshot, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", *uiScreenshot, len(shot))
	}
}

// lowContrastJS lists the visible text elements of the page whose colour
// has less than 4.5:1 contrast against their background (the nearest
// ancestor's that is not transparent), as "selector ratio".
const lowContrastJS = `(() => {
  const rgb = (s) => (s.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const bg = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || c[3] > 0) return c;
    }
    return [255, 255, 255];
  };
  const out = [];
  for (const el of document.querySelectorAll('h1, h2, th, td, .state, .badge, .cmd-btn, .conn, .summary, button, label, .term, a')) {
    if (!el.offsetParent || !el.textContent.trim() || el.disabled) continue;
    const a = lum(rgb(getComputedStyle(el).color)), b = lum(bg(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) out.push(el.tagName + '.' + el.className + ' ' + ratio.toFixed(2));
  }
  return out;
})()`

// distinctColors counts the distinct colours of img, up to 1000.
func distinctColors(img image.Image) int {
	seen := make(map[[4]uint32]bool)
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= 1000 {
				return len(seen)
			}
		}
	}
	return len(seen)
}
