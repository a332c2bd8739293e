package main

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHelpAndVersion: every subcommand has --help with examples on stdout
// and exit 0; a bad flag or command is exit 2 with the reason on stderr.
func TestHelpAndVersion(t *testing.T) {
	for _, c := range commands {
		var out, errOut strings.Builder
		if code := run([]string{c.name, "--help"}, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Errorf("%s --help: exit %d, want 0", c.name, code)
		}
		if !strings.Contains(out.String(), "Usage:\n  agentproc "+c.name) || !strings.Contains(out.String(), "\nExamples:\n  ") || errOut.Len() != 0 {
			t.Errorf("%s --help: stdout %q, stderr %q; want usage and examples on stdout", c.name, out.String(), errOut.String())
		}
	}
	var out, errOut strings.Builder
	if code := run([]string{"--version"}, nil, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "agentproc ") {
		t.Errorf("--version: exit %d, %q", code, out.String())
	}
	for _, args := range [][]string{{"ps", "--bogus"}, {"frobnicate"}, {}, {"logs"}, {"run"}} {
		var out, errOut strings.Builder
		if code := run(args, nil, &out, &errOut); code != 2 || errOut.Len() == 0 || out.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and the reason on stderr", args, code, out.String(), errOut.String())
		}
	}
}

func TestShellCommand(t *testing.T) {
	for _, tt := range []struct {
		argv []string
		want string
	}{
		{[]string{"make && ./app"}, "make && ./app"},
		{[]string{"echo", "a  b", "it's", "x=1", ""}, `echo 'a  b' 'it'\''s' x=1 ''`},
	} {
		if got := shellCommand(tt.argv); got != tt.want {
			t.Errorf("shellCommand(%q): got %s, want %s", tt.argv, got, tt.want)
		}
	}
}

// TestMCPRefusesBadStart: a work dir that is missing or not a directory,
// and a stray argument (agentproc mcp ~/project), end mcp at startup with
// exit 2 and the reason, before any client could call a tool in the wrong
// place or unconfined.
func TestMCPRefusesBadStart(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "--workdir", filepath.Join(dir, "typo")}, "--workdir " + filepath.Join(dir, "typo") + ": "}, // then the OS's words for a missing file
		{[]string{"mcp", "--workdir", file, "--sandbox", "none"}, "is not a directory"},
		{[]string{"mcp", dir}, fmt.Sprintf("unexpected argument %q", dir)},
		{[]string{"ps", "extra"}, `unexpected argument "extra"`},
	} {
		var out, errOut strings.Builder
		code := run(tt.args, strings.NewReader(""), &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), tt.want) || out.Len() != 0 {
			t.Errorf("%q: got exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, out.String(), errOut.String(), tt.want)
		}
	}
}

// TestReadmeInstallWorks: the first install command README.md shows is the
// clone route, not go install ...@latest (which fails until a command tag
// exists), and its last step, go install . in cmd/agentproc, installs a
// working agentproc from this checkout. The clone itself is left out: the
// test runs without the network.
func TestReadmeInstallWorks(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to install with (Wine runs the Windows test binary without one): %v", err)
	}
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "go install") {
			first = line
			break
		}
	}
	const want = "git clone https://github.com/agentproc/agentproc && cd agentproc/cmd/agentproc && go install ."
	if first != want {
		t.Fatalf("README.md's first install command: got %q, want %q", first, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := t.TempDir()
	cmd := exec.CommandContext(ctx, goTool, "install", ".")
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install . in cmd/agentproc: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "agentproc"), "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "agentproc ") {
		t.Errorf("the installed agentproc --version: got %q, %v; want its version", out, err)
	}
}

// TestHelpNamesEveryCommand: the texts that list the client commands (the
// package doc, serve --help, the README's list) name every one in the
// command table, so a new verb cannot be left out of them.
func TestHelpNamesEveryCommand(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var serveHelp strings.Builder
	if code := run([]string{"serve", "--help"}, strings.NewReader(""), &serveHelp, &serveHelp); code != 0 {
		t.Fatalf("serve --help: exit %d", code)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{
		"the package doc": f.Doc.Text(),
		"serve --help":    serveHelp.String(),
		"README.md":       string(readme),
	}
	notClients := map[string]bool{"mcp": true, "serve": true, "completion": true, "man": true, "version": true}
	for _, c := range commands {
		if notClients[c.name] {
			continue
		}
		word := regexp.MustCompile(`\b` + c.name + `\b`)
		for where, text := range texts {
			if !word.MatchString(text) {
				t.Errorf("%s: got no mention of %s, want every client command named", where, c.name)
			}
		}
	}
}

// TestManPage: agentproc man prints a page groff renders without a warning,
// with a section for every command of the table, its usage line, and every
// flag its flag set holds (as shell completion lists them); the work dir's
// default is said in words, not as the path of the machine that made it.
func TestManPage(t *testing.T) {
	t.Parallel()
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Skipf("groff is not installed (.ci/install-test-deps.sh installs groff-base): %v", err)
	}
	var page, errOut strings.Builder
	if code := run([]string{"man"}, strings.NewReader(""), &page, &errOut); code != 0 {
		t.Fatalf("man: exit %d, %s", code, errOut.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, groff, "-man", "-Tutf8", "-ww")
	cmd.Stdin = strings.NewReader(page.String())
	var rendered, warnings strings.Builder
	cmd.Stdout, cmd.Stderr = &rendered, &warnings
	if err := cmd.Run(); err != nil || warnings.Len() != 0 {
		t.Fatalf("groff: %v, warnings %q; want none", err, warnings.String())
	}
	// groff marks bold by overstriking on a terminal; the text is what a
	// reader sees. Each command's section runs from its heading, indented
	// three spaces, to the next heading.
	text := regexp.MustCompile(`.\x08`).ReplaceAllString(rendered.String(), "")
	sections := map[string]string{}
	heading := regexp.MustCompile(`(?m)^   ([a-z]+)$`)
	at := heading.FindAllStringSubmatchIndex(text, -1)
	for i, m := range at {
		end := len(text)
		if i+1 < len(at) {
			end = at[i+1][0]
		}
		sections[text[m[2]:m[3]]] = text[m[1]:end]
	}
	// Made where $AGENTPROC_URL is set, the page does not carry it.
	const url = "http://192.0.2.1:7070"
	made := clientCmd(ctx, []string{"AGENTPROC_URL=" + url}, "man")
	if out, err := made.Output(); err != nil || strings.Contains(string(out), url) {
		t.Errorf("man with $AGENTPROC_URL set: got %v, the URL in the page: %v; want the page without it", err, strings.Contains(string(out), url))
	}
	wd, _ := os.Getwd()
	if flat := strings.Join(strings.Fields(text), " "); strings.Contains(flat, "(default "+wd+")") || !strings.Contains(flat, "(default: the current directory)") {
		t.Errorf("the page gives mcp's --workdir default as %s, want it in words", wd)
	}
	for _, c := range commands {
		section, ok := sections[c.name]
		if !ok {
			t.Errorf("%s: got no section in the page", c.name)
			continue
		}
		var usage strings.Builder
		run([]string{c.name, "--help"}, strings.NewReader(""), &usage, &usage)
		line, _, _ := strings.Cut(strings.TrimPrefix(usage.String(), "Usage:\n"), "\n")
		if !strings.Contains(strings.Join(strings.Fields(section), " "), strings.Join(strings.Fields(line), " ")) {
			t.Errorf("%s: got no usage line %q in its section", c.name, strings.TrimSpace(line))
		}
		var flags strings.Builder
		runComplete(ctx, &env{stdin: strings.NewReader(""), stdout: &flags, stderr: io.Discard}, []string{c.name, "-"})
		for _, f := range strings.Fields(flags.String()) {
			if f != "--help" && !regexp.MustCompile(`(?m)^ +`+regexp.QuoteMeta(f)+`( |$)`).MatchString(section) {
				t.Errorf("%s: got no paragraph for %s in its section, want every flag of its flag set", c.name, f)
			}
		}
	}
}
