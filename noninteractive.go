package agentproc

import "sync"

// A model cannot answer an editor, a pager or a password prompt: a command
// that waits for one waits until its timeout. Unless WithNonInteractiveEnv
// turns it off, every child gets the variables below, which make the common
// tools fail at once, or not page, instead of waiting for a person. They
// are applied to the base environment before the WithEnv hook sees it, so
// the hook and then Request.Env can set any of them back.

// noEditor is the editor every child gets: a shell command that fails at
// once with a message on stderr saying why. git runs its editor through
// the shell, so the quoting holds there and with tools that split like a
// shell; a tool that runs the value as one program name, or splits it on
// spaces alone, fails to start it, which also ends the command at once.
const noEditor = `sh -c 'echo "agentproc: no editor is available (the command runs without a person at a terminal); give the text on the command line instead, e.g. git commit -m" >&2; exit 1' agentproc-no-editor`

// envSetting is one variable of the non-interactive environment: set to
// value, or removed from the base environment when unset is true.
type envSetting struct {
	key, value string
	unset      bool
	// noTTYOnly: only for processes without Request.TTY. A terminal
	// process exists to behave as in a terminal, colours included.
	noTTYOnly bool
}

// nonInteractiveSettings is the list the README documents, with the reason
// for each entry.
var nonInteractiveSettings = []envSetting{
	// Editors: git (GIT_EDITOR over core.editor, VISUAL and EDITOR), git
	// rebase -i (GIT_SEQUENCE_EDITOR over sequence.editor), crontab, and
	// most tools that open one read EDITOR or VISUAL.
	{key: "EDITOR", value: noEditor},
	{key: "VISUAL", value: noEditor},
	{key: "GIT_EDITOR", value: noEditor},
	{key: "GIT_SEQUENCE_EDITOR", value: noEditor},
	// git merge opens the editor for the merge message when it runs in a
	// terminal; "no" takes the default message instead of failing.
	{key: "GIT_MERGE_AUTOEDIT", value: "no"},
	// Pagers wait for a key once the output is longer than a screen. They
	// only start on a terminal, so these matter for Request.TTY processes.
	{key: "PAGER", value: "cat"},
	{key: "GIT_PAGER", value: "cat"},
	{key: "MANPAGER", value: "cat"},
	{key: "GH_PAGER", value: "cat"},
	{key: "SYSTEMD_PAGER", value: "cat"},
	// Prompts: git asks for credentials on the terminal unless
	// GIT_TERMINAL_PROMPT is 0, and through an askpass program (a window
	// nobody sees) when GIT_ASKPASS or SSH_ASKPASS names one; Git Credential
	// Manager prompts unless GCM_INTERACTIVE is never; gh, apt/dpkg and pip
	// have their own switches. Nothing here answers "yes" for the user.
	{key: "GIT_TERMINAL_PROMPT", value: "0"},
	{key: "GIT_ASKPASS", unset: true},
	{key: "SSH_ASKPASS", unset: true},
	{key: "GCM_INTERACTIVE", value: "never"},
	{key: "GH_PROMPT_DISABLED", value: "1"},
	{key: "DEBIAN_FRONTEND", value: "noninteractive"},
	{key: "PIP_NO_INPUT", value: "1"},
	// gpg's pinentry would open the host's terminal named here.
	{key: "GPG_TTY", unset: true},
	// Without a terminal: no escape sequences in the output.
	{key: "TERM", value: "dumb", noTTYOnly: true},
	{key: "NO_COLOR", value: "1", noTTYOnly: true},
}

// nonInteractiveEnv returns base with the non-interactive settings for a
// process with (tty) or without a terminal applied.
func nonInteractiveEnv(base []string, tty bool) []string {
	s := nonInteractiveSets()[boolIndex(tty)]
	return mergeEnv(base, s.over, s.unset...)
}

// envChanges is what nonInteractiveSettings does to one kind of process.
type envChanges struct {
	over  map[string]string
	unset []string
}

// nonInteractiveSets holds the changes for processes without (index 0)
// and with (index 1) a terminal, built once: every Start uses them, and
// mergeEnv only reads them.
var nonInteractiveSets = sync.OnceValue(func() [2]envChanges {
	var sets [2]envChanges
	for i, tty := range []bool{false, true} {
		c := envChanges{over: make(map[string]string, len(nonInteractiveSettings))}
		for _, s := range nonInteractiveSettings {
			switch {
			case s.noTTYOnly && tty:
			case s.unset:
				c.unset = append(c.unset, s.key)
			default:
				c.over[s.key] = s.value
			}
		}
		sets[i] = c
	}
	return sets
})

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}
