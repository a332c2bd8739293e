package agentproc

import (
	"errors"
	"strings"
	"testing"
)

// The Windows layer's decisions, tested on every OS: Wine cannot show most
// of the situations they are for (a host without a console, a host inside a
// job with UI limits, cmd.exe's batch prompt), so the logic is checked here
// and the glue under Wine.

func TestConsoleFlags(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		hostHasConsole bool
		flags          uint32
		own            bool
	}{
		{true, 0, false},
		{false, winCreateNoWindow, true},
	} {
		flags, own := consoleFlags(tt.hostHasConsole)
		if flags != tt.flags || own != tt.own {
			t.Errorf("consoleFlags(%v): got %#x, %v, want %#x, %v", tt.hostHasConsole, flags, own, tt.flags, tt.own)
		}
	}
}

func TestWinExitSignal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code   uint32
		killed bool
		want   string
	}{
		{0, false, ""},
		{1, false, ""}, // exit 1 by itself
		{1, true, "TerminateJobObject"},
		{42, true, ""}, // the shell exited with its own code before the kill took
		{0xC000013A, false, "CTRL_BREAK_EVENT"},
		{0xC000013A, true, "CTRL_BREAK_EVENT"},
	} {
		if got := winExitSignal(tt.code, tt.killed); got != tt.want {
			t.Errorf("winExitSignal(%#x, %v): got %q, want %q", tt.code, tt.killed, got, tt.want)
		}
	}
}

func TestNestedJobPlan(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                                      string
		inJob, uiRestricted, breakaway, silentBrk bool
		flags                                     uint32
		fails                                     bool
	}{
		{"not in a job", false, false, false, false, 0, false},
		{"job without UI limits nests", true, false, false, false, 0, false},
		{"UI limits, silent breakaway", true, true, false, true, 0, false},
		{"UI limits, breakaway allowed", true, true, true, false, winCreateBreakawayFromJob, false},
		{"UI limits, no breakaway", true, true, false, false, 0, true},
	} {
		flags, err := nestedJobPlan(tt.inJob, tt.uiRestricted, tt.breakaway, tt.silentBrk)
		if flags != tt.flags || (err != nil) != tt.fails {
			t.Errorf("%s: got %#x, %v, want %#x, fails %v", tt.name, flags, err, tt.flags, tt.fails)
		}
		if err != nil && (!errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "UI restrictions")) {
			t.Errorf("%s: error got %v, want ErrUnsupported naming the UI restrictions", tt.name, err)
		}
	}
}

func TestCmdPrograms(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		command string
		want    []string
	}{
		{`npm run dev`, []string{"npm"}},
		{`cd web && npm run dev`, []string{"npm"}},
		{`@echo off & yarn start`, []string{"yarn"}},
		{`"C:\Program Files\nodejs\npx.cmd" vite`, []string{`C:\Program Files\nodejs\npx.cmd`}},
		{`call build.bat release`, []string{"build.bat"}},
		{`start /b "" server.exe & echo started`, []string{"server.exe"}},
		{`start /b worker.cmd`, []string{"worker.cmd"}},
		{`echo a ^& b.bat`, nil},  // ^& is text, not a separator
		{`echo "x & y.cmd"`, nil}, // quoted & is text
		{`go test ./... 2>&1 | findstr FAIL`, []string{"go", "findstr"}},
		{`(pnpm install) || exit /b 1`, []string{"pnpm"}},
		{`node server.js > out.txt`, []string{"node"}},
		{`set X=1 & node app.js`, []string{"node"}},
	} {
		got := cmdPrograms(tt.command)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("cmdPrograms(%q): got %q, want %q", tt.command, got, tt.want)
		}
	}
}

func TestRunsBatchFile(t *testing.T) {
	t.Parallel()
	// What cmd.exe would find on a typical Node.js install.
	onPath := map[string]string{
		"npm":  `C:\Program Files\nodejs\npm.cmd`,
		"npx":  `C:\Program Files\nodejs\npx.cmd`,
		"node": `C:\Program Files\nodejs\node.exe`,
		"go":   `C:\Go\bin\go.exe`,
	}
	resolve := func(name string) string { return onPath[strings.ToLower(name)] }
	for _, tt := range []struct {
		command string
		want    bool
	}{
		{`npm run dev`, true},
		{`NPX vite`, true},
		{`cd app && npm start`, true},
		{`node server.js`, false},
		{`go test ./...`, false},
		{`build.BAT`, true},
		{`scripts\dev.cmd --watch`, true},
		{`echo npm.cmd`, false},
		{`unknown-tool`, false},
		{`node.exe run.cmd`, false}, // an argument, not the program
	} {
		if got := runsBatchFile(tt.command, resolve); got != tt.want {
			t.Errorf("runsBatchFile(%q): got %v, want %v", tt.command, got, tt.want)
		}
	}
}

func TestOnlyShellsLeft(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		images []string
		want   bool
	}{
		{nil, false},
		{[]string{"cmd.exe"}, true},
		{[]string{"CMD.EXE", "conhost.exe"}, true},
		{[]string{"cmd.exe", "node.exe"}, false},
		{[]string{"node.exe"}, false},
		{[]string{"conhost.exe"}, true},
	} {
		if got := onlyShellsLeft(tt.images); got != tt.want {
			t.Errorf("onlyShellsLeft(%q): got %v, want %v", tt.images, got, tt.want)
		}
	}
}

func TestCountPrograms(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		images []string
		want   int
	}{
		{nil, 0},
		{[]string{"conhost.exe"}, 0},
		{[]string{"cmd.exe", "ConHost.exe", "node.exe"}, 2},
		{[]string{""}, 1}, // unknown counts
	} {
		if got := countPrograms(tt.images); got != tt.want {
			t.Errorf("countPrograms(%q): got %d, want %d", tt.images, got, tt.want)
		}
	}
}
