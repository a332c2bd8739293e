package agentproc

import (
	"strings"

	"golang.org/x/xerrors"
	"mvdan.cc/sh/v3/syntax"
)

// Warnings AnalyzeCommand reports. The text is part of the API: callers and
// models may match on it, so change it only deliberately.
const (
	// warnDetach is reported for nohup, setsid or disown anywhere in the
	// command, because a detached process escapes the manager's process
	// group and keeps running after Kill.
	warnDetach = "nohup/setsid/disown detach processes; use Background instead"

	// warnInnerBackground is reported for a & that is not the last
	// top-level one, such as "a & b" or "(a &)": when the command ends the
	// manager kills its process group, and that job with it.
	warnInnerBackground = "& in the middle of the command: that job is killed when the command ends"

	// warnAmpRedirect is reported for &> and &>>. Bash reads "cmd &>f" as a
	// redirection, but a POSIX sh such as dash reads it as "cmd &" followed
	// by ">f", silently backgrounding cmd.
	warnAmpRedirect = "&> is bash-only: sh (e.g. dash) runs cmd &>file as cmd & >file, in the background; use >file 2>&1"
)

// Analysis is what AnalyzeCommand found in a shell command.
type Analysis struct {
	// Command is the command to run. When Background is true it is the
	// input with the final & removed (see AnalyzeCommand); otherwise it is
	// the input byte for byte.
	Command string

	// Background reports whether the last top-level statement was
	// backgrounded with &, as in "npm run dev &".
	Background bool

	// Warnings holds advice about constructs that start processes the
	// manager cannot follow, each at most once. Nil means nothing to say.
	Warnings []string
}

// AnalyzeCommand parses command as a shell script and reports whether its
// last top-level statement is backgrounded with &, so that a caller can run
// it with Background instead of letting the shell fork a job that outlives
// the command.
//
// The command is parsed as Bash, not POSIX sh. Models write bash-isms such
// as "|&", "[[ ]]", "<<<" and "$'...'" even when the command runs under
// sh -c, and a POSIX parser would reject those commands outright. Where the
// two languages disagree about backgrounding ("&>"), a warning says so.
// Like the parser, AnalyzeCommand reads a carriage return as a blank, so
// CRLF text is analyzed as if it had plain newlines.
// A parse error is returned wrapped, with the zero Analysis; AnalyzeCommand
// never guesses at a command it cannot parse. A command containing a NUL
// byte is an error too, as it cannot be passed to a shell.
//
// When Background is true, Command is the input cut just after the end of
// the last statement: the & and the blanks or line continuations before it
// go, and so do the comments and blank lines after it, as in
// "a >log 2>&1 & # server" -> "a >log 2>&1". Everything before the cut is
// kept byte for byte. If the command contains a here-document, whose body
// may follow the &, the text after the & is kept, preceded by a space if it
// does not already start with a blank.
//
// A command that is empty, blank or only comments has nothing to detect:
// AnalyzeCommand returns Analysis{Command: command} and a nil error, leaving
// the caller to reject it if it must.
func AnalyzeCommand(command string) (Analysis, error) {
	// No shell ever sees a NUL: argv strings end at the first one, so the
	// command cannot run as written. The parser skips NULs instead, which
	// would hide the mismatch.
	if i := strings.IndexByte(command, 0); i >= 0 {
		return Analysis{}, xerrors.Errorf("agentproc: parse command: NUL byte at offset %d", i)
	}
	// A Parser keeps state between calls, so one is made per call rather
	// than shared across goroutines.
	parser := syntax.NewParser(syntax.Variant(syntax.LangBash))
	file, err := parser.Parse(strings.NewReader(command), "")
	if err != nil {
		return Analysis{}, xerrors.Errorf("agentproc: parse command: %w", err)
	}

	a := Analysis{Command: command}
	a.Warnings = commandWarnings(file)
	if len(file.Stmts) == 0 {
		return a, nil
	}
	last := file.Stmts[len(file.Stmts)-1]
	if !last.Background {
		return a, nil
	}

	amp := int(last.Semicolon.Offset())
	if !last.Semicolon.IsValid() || amp >= len(command) || command[amp] != '&' {
		// The parser promises the position of the &; if it ever does
		// not hold, running a command we failed to edit would be a guess.
		return Analysis{}, xerrors.Errorf("agentproc: parse command: no & at offset %d", amp)
	}
	end := stmtContentEnd(command, last, amp)
	rest := command[amp+1:]
	if !hasHeredoc(file) {
		// Without a here-document, the grammar allows only blanks and
		// comments after the final &, so nothing that runs is dropped.
		rest = ""
	} else if rest != "" && !strings.ContainsRune(" \t\r\n", rune(rest[0])) {
		// "cat <<E&#c" must not become "cat <<E#c", which changes the
		// delimiter word.
		rest = " " + rest
	}
	a.Command = command[:end] + rest
	a.Background = true
	return a, nil
}

// stmtContentEnd returns the offset just past the last token of s, whose
// & is at offset amp, by stepping back over blanks and line continuations.
//
// The statement's End position is not used: the parser does not always place
// it on the last byte ("A+=" ends one byte early), and a wrong cut changes
// what runs. Going back from the & is safe because the parse already
// succeeded: only blanks and continuations can sit between a statement's last
// token and its &, and a blank or newline preceded by an odd run of
// backslashes is escaped, so it belongs to the token.
func stmtContentEnd(command string, s *syntax.Stmt, amp int) int {
	start := int(s.Pos().Offset())
	end := amp
	for end > start {
		switch {
		case strings.ContainsRune(" \t\r", rune(command[end-1])) && !escaped(command, end-1):
			end--
		case strings.HasSuffix(command[:end], "\\\n") && !escaped(command, end-2):
			end -= 2
		case strings.HasSuffix(command[:end], "\\\r\n") && !escaped(command, end-3):
			end -= 3
		default:
			return end
		}
	}
	return end
}

// escaped reports whether the byte at offset i of command is preceded by an
// odd number of backslashes, that is, quoted by the last of them.
func escaped(command string, i int) bool {
	n := 0
	for i-n > 0 && command[i-n-1] == '\\' {
		n++
	}
	return n%2 == 1
}

// hasHeredoc reports whether any redirection in f is a here-document (<< or
// <<-), whose body lives on the lines after the operator.
func hasHeredoc(f *syntax.File) bool {
	found := false
	syntax.Walk(f, func(node syntax.Node) bool {
		if r, ok := node.(*syntax.Redirect); ok && (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) {
			found = true
		}
		return !found
	})
	return found
}

// commandWarnings walks f and returns each applicable warning once, in the
// order the constants are declared, so the result is stable for a given
// command.
func commandWarnings(f *syntax.File) []string {
	var last *syntax.Stmt
	if len(f.Stmts) > 0 {
		last = f.Stmts[len(f.Stmts)-1]
	}
	var detach, inner, ampRedirect, waits bool
	syntax.Walk(f, func(node syntax.Node) bool {
		switch n := node.(type) {
		case *syntax.Stmt:
			if n.Background && n != last {
				inner = true
			}
		case *syntax.CallExpr:
			switch callName(n, 0) {
			case "nohup", "setsid", "disown":
				detach = true
			case "wait":
				waits = true
			case "exec", "command", "builtin", "sudo", "env", "nice":
				// "sudo nohup a" detaches just the same. The wrapped
				// command's position depends on each wrapper's options,
				// so any later literal argument counts: a false alarm
				// costs a line of advice, a miss costs a stray process.
				for i := 1; i < len(n.Args); i++ {
					switch callName(n, i) {
					case "nohup", "setsid", "disown":
						detach = true
					}
				}
			}
		case *syntax.Redirect:
			if n.Op == syntax.RdrAll || n.Op == syntax.AppAll {
				ampRedirect = true
			}
		}
		return true
	})

	var warnings []string
	if detach {
		warnings = append(warnings, warnDetach)
	}
	// "a & b & wait" is the usual way to run jobs in parallel: wait keeps
	// the command alive until they finish, so there is nothing to kill.
	if inner && !waits {
		warnings = append(warnings, warnInnerBackground)
	}
	if ampRedirect {
		warnings = append(warnings, warnAmpRedirect)
	}
	return warnings
}

// callName returns the i-th word of call if it is a plain literal, and ""
// otherwise: a word built from expansions cannot be judged without running
// the shell.
func callName(call *syntax.CallExpr, i int) string {
	if i >= len(call.Args) {
		return ""
	}
	return call.Args[i].Lit()
}
