// Command quickstart shows agentproc's main job in one run: a background
// server and a foreground command with a large output, supervised, waited
// for, truncated, listed, stopped and cleaned up.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"runtime"
	"strings"
	"time"

	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc"
)

// commands holds the shell text for each platform's default shell.
type commands struct{ server, build string }

func main() {
	if err := run(os.Stdout, platformCommands(buildLines)); err != nil {
		log.Fatal(err)
	}
}

// buildLines is how many lines the demo's build prints: far more than a
// model can read.
const buildLines = 200000

// platformCommands returns the demo's commands for the default shell of
// this platform, with a build that prints lines lines.
func platformCommands(lines int) commands {
	cmds := commands{
		// A "server" that prints a line every 100 ms forever.
		server: `i=0; echo "server: listening"; while :; do i=$((i+1)); echo "server: request $i"; sleep 0.1; done`,
		build:  fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "compiling file_$i.go"; i=$((i+1)); done; echo "build ok"`, lines),
	}
	if runtime.GOOS == "windows" {
		// Echo off rather than a loop body of @(...), which Wine's
		// cmd.exe runs as nothing; the server prints a line a second.
		cmds = commands{
			server: `@echo off& echo server: listening& for /l %i in (1,1,100000) do (echo server: request %i& ping -n 2 127.0.0.1 >nul)`,
			build:  fmt.Sprintf(`@echo off& (for /l %%i in (0,1,%d) do echo compiling file_%%i.go)& echo build ok`, lines-1),
		}
	}
	return cmds
}

func run(w io.Writer, cmds commands) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	m := agentproc.New(agentproc.WithGracePeriod(2 * time.Second))
	defer m.Close()

	server, err := m.Start(ctx, agentproc.Request{Command: cmds.server, Background: true})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "started server   %s (pid %d)\n", server.ID(), server.Info().PID)
	// Wait for readiness by what the server says, not for a fixed time.
	line, err := server.WaitMatch(ctx, regexp.MustCompile(`listening`))
	if err != nil {
		return xerrors.Errorf("server never got ready: %w", err)
	}
	fmt.Fprintf(w, "server is ready: %q\n", line)
	// Remember where its output stands, to read only what comes next.
	seen, err := server.Read(0)
	if err != nil {
		return err
	}

	build, err := m.Start(ctx, agentproc.Request{Command: cmds.build})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "started build    %s (pid %d)\n", build.ID(), build.Info().PID)

	info, err := build.Wait(ctx)
	if err != nil {
		return xerrors.Errorf("wait for build: %w", err)
	}
	out := build.Output()
	fmt.Fprintf(w, "\nbuild exited: code %d, reason %s, took %s\n",
		*info.ExitCode, info.Reason, info.ExitedAt.Sub(info.StartedAt).Round(time.Millisecond))
	if t := out.Truncated; t != nil {
		fmt.Fprintf(w, "output: %d bytes written, %d kept, %d omitted (%s)\n",
			t.OriginalBytes, t.RetainedBytes, t.OmittedBytes, t.Strategy)
	}
	fmt.Fprintln(w, "what a model would see (first and last lines):")
	printEnds(w, out.Text, 3)

	fmt.Fprintln(w, "\nprocesses:")
	for _, p := range m.List() {
		state := "running"
		if !p.Running {
			state = fmt.Sprintf("exited %d", *p.ExitCode)
		}
		fmt.Fprintf(w, "  %-36s %-10s background=%-5v %s\n", p.ID, state, p.Background, p.Command[:min(len(p.Command), 30)]+"...")
	}

	// Only what the server printed since we last looked: Next is the
	// absolute offset to continue from.
	news, err := server.Read(seen.Next)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nserver printed %d new bytes while the build ran (offset %d to %d)\n",
		news.Next-news.Offset, news.Offset, news.Next)

	stopped, err := server.Stop(ctx)
	if err != nil {
		return xerrors.Errorf("stop server: %w", err)
	}
	fmt.Fprintf(w, "\nserver stopped: reason %s, signal %q, exit code %d\n",
		stopped.Reason, stopped.ExitSignal, *stopped.ExitCode)
	fmt.Fprintln(w, "server's last lines:")
	text := server.Output().Text
	printEnds(w, text, 0)

	if err := m.Close(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nmanager closed; nothing is left running")
	return nil
}

// printEnds prints the first head lines (and the omission marker, if any)
// and the last 3 lines of text.
func printEnds(w io.Writer, text string, head int) {
	lines := strings.Split(strings.TrimRight(text, "\r\n"), "\n")
	if len(lines) <= head+4 {
		for _, l := range lines {
			fmt.Fprintln(w, "  |", strings.TrimRight(l, "\r"))
		}
		return
	}
	for _, l := range lines[:head] {
		fmt.Fprintln(w, "  |", strings.TrimRight(l, "\r"))
	}
	for _, l := range lines[head : len(lines)-3] {
		if strings.HasPrefix(l, "[... ") {
			fmt.Fprintln(w, "  |", l)
		}
	}
	for _, l := range lines[len(lines)-3:] {
		fmt.Fprintln(w, "  |", strings.TrimRight(l, "\r"))
	}
}
