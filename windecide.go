package agentproc

import (
	"path/filepath"
	"strings"

	"golang.org/x/xerrors"
)

// This file holds the decisions the Windows layer makes, written as pure
// functions without Windows calls so that their table tests run on every
// OS (windecide_test.go). sysproc_windows.go and signal_windows.go gather
// the inputs from the system and act on the answers.

// Windows values the decisions need; golang.org/x/sys/windows does not build
// on other systems, so they are spelled out here.
const (
	// winCreateNoWindow is CREATE_NO_WINDOW: a console program gets a new
	// console whose window is never shown.
	winCreateNoWindow = 0x08000000
	// winCreateBreakawayFromJob is CREATE_BREAKAWAY_FROM_JOB.
	winCreateBreakawayFromJob = 0x01000000
	// winStatusControlCExit is STATUS_CONTROL_C_EXIT, the exit code the
	// default console control handler gives a process it ends on Ctrl+C or
	// Ctrl+Break (it calls ExitProcess with this code).
	winStatusControlCExit = 0xC000013A
	// winJobKillExitCode is the exit code TerminateJobObject gives every
	// member when this package kills a job: 1, a plain failure.
	winJobKillExitCode = 1
)

// The names Info.ExitSignal takes on Windows, which has no signals: the console
// event, or the job kill, that ended the shell.
const (
	winSignalCtrlBreak = "CTRL_BREAK_EVENT"
	winSignalJobKill   = "TerminateJobObject"
)

// consoleFlags decides how a child gets its console. A host with a console
// (a terminal program) shares it: the child needs no console of its own and
// CTRL_BREAK_EVENT reaches it directly. A host without one (a service, a
// -H windowsgui program, an IDE extension host) would make Windows open a
// visible console window for every command, and could not deliver
// CTRL_BREAK_EVENT, which reaches only processes on the caller's console.
// Such a child is started with CREATE_NO_WINDOW, a console of its own that is
// never shown, and breaks are delivered by attaching to that console for the
// duration of the call (ownConsole).
func consoleFlags(hostHasConsole bool) (flags uint32, ownConsole bool) {
	if hostHasConsole {
		return 0, false
	}
	return winCreateNoWindow, true
}

// winExitSignal names what ended a Windows shell, for Info.ExitSignal: the job
// kill when this package terminated the job while the shell was running
// and the shell exited with the kill's code, the console break when the
// shell ended with STATUS_CONTROL_C_EXIT (cmd.exe passes on the exit code of
// the program it waited for, so a program the default handler ended on
// Ctrl+Break shows here), else nothing: the shell exited by itself.
func winExitSignal(code uint32, killedRunning bool) string {
	switch {
	case killedRunning && code == winJobKillExitCode:
		return winSignalJobKill
	case code == winStatusControlCExit:
		return winSignalCtrlBreak
	}
	return ""
}

// errNestedJob explains why a host inside a job may be unable to contain its
// commands.
var errNestedJob = xerrors.Errorf("this process runs inside a Job Object with UI restrictions that does not allow breakaway, so each command's own job cannot be nested in it (Windows refuses nesting with either job setting UI limits; see docs/containment.md): %w", ErrUnsupported)

// nestedJobPlan decides how to start a child when this process itself
// belongs to a job. Since Windows 8 a child's job nests inside the host's,
// unless either job has UI restrictions (JobObjectBasicUIRestrictions), in
// which case AssignProcessToJobObject fails with ERROR_ACCESS_DENIED. Then
// the only way to give the child a job of its own is to start it outside
// the host's job: silently when the host's job breaks children away by
// itself (JOB_OBJECT_LIMIT_SILENT_BREAKAWAY_OK), with
// CREATE_BREAKAWAY_FROM_JOB when it allows that (JOB_OBJECT_LIMIT_BREAKAWAY_OK).
// A job that allows neither leaves no way: Start fails with errNestedJob
// before anything runs.
func nestedJobPlan(inJob, uiRestricted, breakawayOK, silentBreakaway bool) (flags uint32, err error) {
	switch {
	case !inJob || !uiRestricted || silentBreakaway:
		return 0, nil
	case breakawayOK:
		return winCreateBreakawayFromJob, nil
	}
	return 0, errNestedJob
}

// cmdBuiltins are the cmd.exe commands that run inside cmd.exe itself, so a
// batch file of the same name on PATH is not what runs.
var cmdBuiltins = map[string]bool{
	"assoc": true, "break": true, "cd": true, "chdir": true, "cls": true,
	"color": true, "copy": true, "date": true, "del": true, "dir": true,
	"echo": true, "endlocal": true, "erase": true, "exit": true, "for": true,
	"ftype": true, "goto": true, "if": true, "md": true, "mkdir": true,
	"mklink": true, "move": true, "path": true, "pause": true, "popd": true,
	"prompt": true, "pushd": true, "rd": true, "rem": true, "ren": true,
	"rename": true, "rmdir": true, "set": true, "setlocal": true,
	"shift": true, "start": true, "time": true, "title": true, "type": true,
	"ver": true, "verify": true, "vol": true, "call": true, "else": true,
	"not": true, "errorlevel": true, "exist": true, "defined": true,
}

// cmdPrograms returns the program names a cmd.exe command line runs: the
// first word of each command separated by &, &&, |, || or parentheses,
// outside double quotes and not escaped with ^, with "call x" and
// "start [/b] ["title"] x" giving x. It does not expand variables; a name
// built from them is returned as written. Names keep their case and any
// directory or extension; builtins (echo, set, ...) are left out.
func cmdPrograms(command string) []string {
	var names []string
	for _, seg := range splitCmdLine(command) {
		words := cmdWords(seg)
		for len(words) > 0 {
			w := strings.TrimLeft(words[0], "@")
			lw := strings.ToLower(w)
			switch {
			case lw == "call":
				words = words[1:]
				continue
			case lw == "start":
				// start's options and its optional quoted title come
				// before the program.
				words = words[1:]
				for len(words) > 0 && strings.HasPrefix(words[0], "/") {
					words = words[1:]
				}
				if len(words) > 1 && strings.HasPrefix(words[0], `"`) {
					words = words[1:]
				}
				continue
			case w == "" || cmdBuiltins[lw]:
			default:
				names = append(names, strings.Trim(w, `"`))
			}
			break
		}
	}
	return names
}

// splitCmdLine cuts a cmd.exe command line at its command separators.
func splitCmdLine(command string) []string {
	var segs []string
	var b strings.Builder
	quoted := false
	for i := 0; i < len(command); i++ {
		c := command[i]
		switch {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '&' && i > 0 && (command[i-1] == '>' || command[i-1] == '<'):
			// >&1 and <&0 are redirections, not separators.
		case c == '^' && i+1 < len(command):
			b.WriteByte(command[i+1])
			i++
			continue
		case c == '&' || c == '|' || c == '(' || c == ')' || c == '\n' || c == '\r':
			segs = append(segs, b.String())
			b.Reset()
			continue
		}
		b.WriteByte(c)
	}
	return append(segs, b.String())
}

// cmdWords splits one command into words at blanks outside double quotes,
// dropping redirections (>file, 2>&1, <in).
func cmdWords(seg string) []string {
	var words []string
	var b strings.Builder
	quoted := false
	flush := func() {
		if b.Len() > 0 {
			words = append(words, b.String())
			b.Reset()
		}
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c == '"':
			quoted = !quoted
			b.WriteByte(c)
		case quoted:
			b.WriteByte(c)
		case c == ' ' || c == '\t' || c == ',' || c == ';' || c == '=':
			flush()
		case c == '<' || c == '>':
			// A redirection: drop it and its target.
			flush()
			for i+1 < len(seg) && (seg[i+1] == '>' || seg[i+1] == '&' || seg[i+1] == ' ') {
				i++
			}
			for i+1 < len(seg) && seg[i+1] != ' ' && seg[i+1] != '\t' {
				i++
			}
		default:
			// A stream number before > belongs to the redirection.
			if c >= '0' && c <= '9' && b.Len() == 0 && i+1 < len(seg) && seg[i+1] == '>' {
				continue
			}
			b.WriteByte(c)
		}
	}
	flush()
	return words
}

// isBatchFile reports whether a program name or path names a batch file,
// which cmd.exe runs itself.
func isBatchFile(name string) bool {
	ext := strings.ToLower(filepath.Ext(strings.ReplaceAll(name, `\`, "/")))
	return ext == ".bat" || ext == ".cmd"
}

// runsBatchFile reports whether a cmd.exe command line runs a batch file:
// a program named with .bat or .cmd, or one that resolve finds as one (npm,
// npx, yarn and pnpm are npm.cmd and friends on Windows). resolve returns
// the path cmd.exe would run for a bare name, or "" when none is found.
func runsBatchFile(command string, resolve func(name string) string) bool {
	for _, name := range cmdPrograms(command) {
		if isBatchFile(name) {
			return true
		}
		if filepath.Ext(strings.ReplaceAll(name, `\`, "/")) == "" && resolve != nil && isBatchFile(resolve(name)) {
			return true
		}
	}
	return false
}

// onlyShellsLeft decides, during a stop of a command that runs a batch
// file, whether the job holds nothing but cmd.exe (and the console host
// conhost.exe, which Windows may start for a console of its own). After a
// Ctrl+Break a cmd.exe running a batch file asks "Terminate batch job
// (Y/N)?" and waits for an answer that no one will type; so once every
// program it ran has ended, the rest of the grace period would be spent on
// that prompt, and the job is killed at once instead. images are the base
// names of the job's live members.
func onlyShellsLeft(images []string) bool {
	if len(images) == 0 {
		return false
	}
	for _, im := range images {
		switch strings.ToLower(im) {
		case "cmd.exe", "conhost.exe":
		default:
			return false
		}
	}
	return true
}

// countPrograms counts the job members that are not conhost.exe. A child
// started with a console of its own (consoleFlags) brings a console host
// into its job, which runs as long as the console has a client and is no
// program of the command's: it must not make a finished tree look alive or
// count as a leftover. An empty name (a member that could not be looked at)
// counts as a program.
func countPrograms(images []string) int {
	n := 0
	for _, im := range images {
		if !strings.EqualFold(im, "conhost.exe") {
			n++
		}
	}
	return n
}
