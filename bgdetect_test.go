package agentproc_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/agentproc/agentproc"
)

// Substrings that identify each warning in the table below; the exact texts
// are checked once in TestAnalyzeCommandWarningText.
const (
	detach = "nohup/setsid/disown"
	middle = "& in the middle"
	ampRdr = "&> is bash-only"
)

type analyzeCase struct {
	name    string
	input   string
	command string   // want Command; ignored when wantErr
	bg      bool     // want Background
	warn    []string // want one warning containing each substring, in order
	wantErr bool
}

var analyzeCases = []analyzeCase{
	// Backgrounded last statement: the & goes, the text before it stays.
	{name: "plain", input: "a &", command: "a", bg: true},
	{name: "no space", input: "a&", command: "a", bg: true},
	{name: "trailing comment dropped", input: "a & # comment", command: "a", bg: true},
	{name: "comment glued to &", input: "a &#c", command: "a", bg: true},
	{name: "trailing newline", input: "a &\n", command: "a", bg: true},
	{name: "comment and newline", input: "a & # start server\n", command: "a", bg: true},
	{name: "tabs", input: "a\t&\t", command: "a", bg: true},
	{name: "and list", input: "a && b &", command: "a && b", bg: true},
	{name: "and or list", input: "a && b || c &", command: "a && b || c", bg: true},
	{name: "pipeline", input: "a | b &", command: "a | b", bg: true},
	{name: "block", input: "{ a; } &", command: "{ a; }", bg: true},
	{name: "subshell with inner &", input: "(a &) &", command: "(a &)", bg: true, warn: []string{middle}},
	{name: "redirections", input: "a >log 2>&1 &", command: "a >log 2>&1", bg: true},
	{name: "dup to stderr", input: "a >&2 &", command: "a >&2", bg: true},
	{name: "for loop", input: "for i in 1 2; do a; done &", command: "for i in 1 2; do a; done", bg: true},
	{name: "while loop", input: "while true; do echo x; done &", command: "while true; do echo x; done", bg: true},
	{name: "if", input: "if a; then b; fi &", command: "if a; then b; fi", bg: true},
	{name: "npm", input: "npm run dev &", command: "npm run dev", bg: true},
	{name: "cd and start", input: "cd dir && npm start &", command: "cd dir && npm start", bg: true},
	{name: "sequence", input: "a; b &", command: "a; b", bg: true},
	{name: "two jobs", input: "a & b &", command: "a & b", bg: true, warn: []string{middle}},
	{name: "lines", input: "a\nb\nc &", command: "a\nb\nc", bg: true},
	{name: "crlf lines", input: "a\r\nb &\r\n", command: "a\r\nb", bg: true},
	{name: "continuation before &", input: "a \\\n &", command: "a", bg: true},
	{name: "continuation kept", input: "echo a \\\n b &", command: "echo a \\\n b", bg: true},
	{name: "escaped space kept", input: `a\ &`, command: `a\ `, bg: true},
	{name: "escaped backslash then blank", input: `a\\ &`, command: `a\\`, bg: true},
	{name: "continuation glued to &", input: "a\\\n&", command: "a", bg: true},
	{name: "append empty assignment", input: "A+=&", command: "A+=", bg: true},
	{name: "empty assignment", input: "A= &", command: "A=", bg: true},
	{name: "assignment prefix", input: "x=1 a &", command: "x=1 a", bg: true},
	{name: "bare redirection", input: ">f &", command: ">f", bg: true},
	{name: "negated", input: "! a &", command: "! a", bg: true},
	{name: "quoted expansion", input: `"$CMD" --port 3000 &`, command: `"$CMD" --port 3000`, bg: true},
	{name: "bash test", input: "[[ -f x ]] && a &", command: "[[ -f x ]] && a", bg: true},
	{name: "here-string", input: `a <<< "x" &`, command: `a <<< "x"`, bg: true},
	{name: "time", input: "time a &", command: "time a", bg: true},
	{name: "nohup backgrounded", input: "nohup a &", command: "nohup a", bg: true, warn: []string{detach}},
	{name: "heredoc after &", input: "cat <<EOF &\nhello &\nEOF\n", command: "cat <<EOF\nhello &\nEOF\n", bg: true},
	{name: "heredoc comment glued", input: "cat <<EOF&#c\nx\nEOF", command: "cat <<EOF #c\nx\nEOF", bg: true},
	{name: "heredoc in and list", input: "a && cat <<EOF &\nb\nEOF\n", command: "a && cat <<EOF\nb\nEOF\n", bg: true},

	// Not backgrounded: Command is the input byte for byte.
	{name: "and", input: "a && b", command: "a && b"},
	{name: "pipe stderr", input: "a |& b", command: "a |& b"},
	{name: "dup stderr", input: "a 2>&1", command: "a 2>&1"},
	{name: "double quoted &", input: `echo "x &"`, command: `echo "x &"`},
	{name: "single quoted &", input: "echo '&'", command: "echo '&'"},
	{name: "escaped &", input: `echo x\&`, command: `echo x\&`},
	{name: "comment &", input: "a #&", command: "a #&"},
	{name: "heredoc body ends with &", input: "cat <<EOF\nrun &\nEOF\n", command: "cat <<EOF\nrun &\nEOF\n"},
	{name: "comments only", input: "# just a comment\n# another &\n", command: "# just a comment\n# another &\n"},
	{name: "empty", input: "", command: ""},
	{name: "blank", input: " \t\n", command: " \t\n"},
	{name: "echo nohup is no call", input: "echo nohup", command: "echo nohup"},
	{name: "subshell", input: "(a &)", command: "(a &)", warn: []string{middle}},
	{name: "command substitution", input: "echo $(a &)", command: "echo $(a &)", warn: []string{middle}},
	{name: "middle", input: "a & b", command: "a & b", warn: []string{middle}},
	{name: "function body", input: "f() { a & }; f", command: "f() { a & }; f", warn: []string{middle}},
	{name: "parallel with wait", input: "a & b & wait", command: "a & b & wait"},
	{name: "setsid", input: "setsid a", command: "setsid a", warn: []string{detach}},
	{name: "disown", input: "disown", command: "disown", warn: []string{detach}},
	{name: "sudo nohup", input: "sudo nohup a", command: "sudo nohup a", warn: []string{detach}},
	{name: "disown after &", input: "a & disown", command: "a & disown", warn: []string{detach, middle}},
	{name: "nohup twice", input: "nohup a & nohup b & wait", command: "nohup a & nohup b & wait", warn: []string{detach}},
	{name: "bash &>", input: "a &>log", command: "a &>log", warn: []string{ampRdr}},
	{name: "bash &>>", input: "a &>>log", command: "a &>>log", warn: []string{ampRdr}},

	// Parse errors are returned, never guessed around.
	{name: "unterminated quote", input: `echo "a &`, wantErr: true},
	{name: "unterminated single quote", input: "echo 'a &", wantErr: true},
	{name: "dangling and", input: "a &&", wantErr: true},
	{name: "lone &", input: "&", wantErr: true},
	{name: "& then ;", input: "a &;", wantErr: true},
	{name: "unclosed subshell", input: "(a &", wantErr: true},
	{name: "NUL byte", input: "a \x00&", wantErr: true},
}

func TestAnalyzeCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range analyzeCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := agentproc.AnalyzeCommand(tc.input)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("AnalyzeCommand(%q): got %+v, nil error, want an error", tc.input, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("AnalyzeCommand(%q): got error %v, want nil", tc.input, err)
			}
			if got.Command != tc.command {
				t.Errorf("AnalyzeCommand(%q).Command: got %q, want %q", tc.input, got.Command, tc.command)
			}
			if got.Background != tc.bg {
				t.Errorf("AnalyzeCommand(%q).Background: got %v, want %v", tc.input, got.Background, tc.bg)
			}
			if !warningsMatch(got.Warnings, tc.warn) {
				t.Errorf("AnalyzeCommand(%q).Warnings: got %q, want one each containing %q", tc.input, got.Warnings, tc.warn)
			}
		})
	}
}

func warningsMatch(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !strings.Contains(got[i], want[i]) {
			return false
		}
	}
	return true
}

// TestAnalyzeCommandUnchangedUnlessBackground states the property callers
// rely on: only a detected background job leads to an edited command.
func TestAnalyzeCommandUnchangedUnlessBackground(t *testing.T) {
	t.Parallel()
	for _, tc := range analyzeCases {
		got, err := agentproc.AnalyzeCommand(tc.input)
		if err != nil || got.Background {
			continue
		}
		if got.Command != tc.input {
			t.Errorf("AnalyzeCommand(%q).Command: got %q, want the input unchanged", tc.input, got.Command)
		}
	}
}

// TestAnalyzeCommandWarningText pins the exact warning strings, which are
// documented API.
func TestAnalyzeCommandWarningText(t *testing.T) {
	t.Parallel()
	got, err := agentproc.AnalyzeCommand("nohup a & b &>log")
	if err != nil {
		t.Fatalf("AnalyzeCommand: got error %v, want nil", err)
	}
	want := []string{
		"nohup/setsid/disown detach processes; use Background instead",
		"& in the middle of the command: that job is killed when the command ends",
		"&> is bash-only: sh (e.g. dash) runs cmd &>file as cmd & >file, in the background; use >file 2>&1",
	}
	if !slices.Equal(got.Warnings, want) {
		t.Errorf("Warnings: got %q, want %q", got.Warnings, want)
	}
}

func TestAnalyzeCommandParseError(t *testing.T) {
	t.Parallel()
	got, err := agentproc.AnalyzeCommand(`npm run "dev &`)
	if err == nil {
		t.Fatalf("got %+v, nil error, want a parse error", got)
	}
	if !strings.HasPrefix(err.Error(), "agentproc: ") {
		t.Errorf("error: got %q, want prefix %q", err, "agentproc: ")
	}
	var perr syntax.ParseError
	if !errors.As(err, &perr) {
		t.Errorf("errors.As(%v, *syntax.ParseError): got false, want true", err)
	}
	if got.Command != "" || got.Background || got.Warnings != nil {
		t.Errorf("Analysis on error: got %+v, want the zero value", got)
	}
}

func FuzzAnalyzeCommand(f *testing.F) {
	for _, tc := range analyzeCases {
		f.Add(tc.input)
	}
	f.Fuzz(func(t *testing.T, input string) {
		got, err := agentproc.AnalyzeCommand(input)
		if err != nil {
			return
		}
		if !got.Background {
			if got.Command != input {
				t.Fatalf("AnalyzeCommand(%q).Command: got %q, want the input unchanged", input, got.Command)
			}
			return
		}
		if !isBackgroundEdit(input, got.Command) {
			t.Fatalf("AnalyzeCommand(%q).Command: got %q, want the input with only its final & and surrounding blanks or comments removed", input, got.Command)
		}
		again, err := agentproc.AnalyzeCommand(got.Command)
		if err != nil {
			t.Fatalf("AnalyzeCommand(%q) of edited %q: got error %v, want nil", got.Command, input, err)
		}
		if again.Background {
			t.Fatalf("AnalyzeCommand(%q) of edited %q: got Background true, want false", got.Command, input)
		}
	})
}

// isBackgroundEdit reports whether command can be had from input by removing
// one & together with blanks or line continuations just before it, and
// either dropping the text after it (if that is only blanks and comments) or
// keeping that text, possibly after one added space.
func isBackgroundEdit(input, command string) bool {
	for amp := 0; amp < len(input); amp++ {
		if input[amp] != '&' {
			continue
		}
		rest := input[amp+1:]
		var prefix string
		switch {
		case strings.HasSuffix(command, " "+rest):
			prefix = strings.TrimSuffix(command, " "+rest)
		case strings.HasSuffix(command, rest):
			prefix = strings.TrimSuffix(command, rest)
		}
		if prefix != "" && strings.HasPrefix(input[:amp], prefix) && isGap(input[len(prefix):amp]) {
			return true
		}
		if strings.HasPrefix(input[:amp], command) && isGap(input[len(command):amp]) && onlyComments(rest) {
			return true
		}
	}
	return false
}

// isGap reports whether s is only blanks and line continuations.
func isGap(s string) bool {
	s = strings.ReplaceAll(s, "\\\r\n", "")
	s = strings.ReplaceAll(s, "\\\n", "")
	return strings.Trim(s, " \t\r") == ""
}

// onlyComments reports whether every line of s is blank, a comment or a
// line continuation.
func onlyComments(s string) bool {
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.Trim(line, " \t\r")
		if line != "" && line != `\` && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}
