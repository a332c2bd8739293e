package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
)

// Shell completion is computed by agentproc itself: each shell's script
// (agentproc completion SHELL) asks "agentproc __complete WORDS...", which
// answers from the same command table and flag sets that parse the command
// line, so completion cannot drift from the code, and process IDs come from
// the serve (ps -a).

const completionHelp = `Print a completion script for bash, zsh or fish: subcommands, their flags
and, where a command takes one, the IDs of the serve's processes.

Examples:
  # bash, for this shell, or for every new one:
  source <(agentproc completion bash)
  agentproc completion bash > ~/.local/share/bash-completion/completions/agentproc

  # zsh (after compinit):
  source <(agentproc completion zsh)

  # fish:
  agentproc completion fish > ~/.config/fish/completions/agentproc.fish
`

var completionScripts = map[string]string{
	"bash": `# bash completion for agentproc
_agentproc() {
	local IFS=$'\n'
	COMPREPLY=($(agentproc __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _agentproc agentproc
`,
	"zsh": `#compdef agentproc
# zsh completion for agentproc
_agentproc() {
	local -a c
	c=("${(@f)$(agentproc __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	compadd -a c
}
compdef _agentproc agentproc
`,
	"fish": `# fish completion for agentproc
complete -c agentproc -f -a '(agentproc __complete (commandline -opc)[2..-1] (commandline -ct))'
`,
}

func runCompletion(_ context.Context, e *env, args []string) error {
	fs := newFlags("completion", "bash|zsh|fish", completionHelp)
	rest, err := parse(fs, e, args, 1)
	if err != nil {
		return err
	}
	script, ok := completionScripts[rest[0]]
	if !ok || len(rest) > 1 {
		return usagef("want one of bash, zsh or fish")
	}
	fmt.Fprint(e.stdout, script)
	return nil
}

// errFlagsListed ends a command's run once parse has listed its flags.
var errFlagsListed = errors.New("flags listed")

// idCommands take process IDs as arguments.
var idCommands = []string{"logs", "stop", "wait", "inspect", "input", "rm"}

// runComplete answers __complete: words are the arguments after
// "agentproc", the last one being completed (maybe empty). It prints one
// candidate a line.
func runComplete(ctx context.Context, e *env, words []string) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur := words[len(words)-1]
	var out []string
	if len(words) == 1 {
		for _, c := range commands {
			out = append(out, c.name)
		}
		out = append(out, "help")
	} else if name := words[0]; strings.HasPrefix(cur, "-") {
		out = flagNames(ctx, name)
	} else if name == "help" && len(words) == 2 {
		for _, c := range commands {
			out = append(out, c.name)
		}
	} else if name == "completion" && len(words) == 2 {
		out = []string{"bash", "fish", "zsh"}
	} else if slices.Contains(idCommands, name) {
		out = processIDs(ctx, words[1:len(words)-1])
	}
	for _, c := range out {
		if strings.HasPrefix(c, cur) {
			fmt.Fprintln(e.stdout, c)
		}
	}
}

// flagNames returns the flags of the command name, as --flag (-f for one
// letter), by running it with parse set to list them instead.
func flagNames(ctx context.Context, name string) []string {
	for _, c := range commands {
		if c.name != name {
			continue
		}
		var names []string
		le := &env{listFlags: &names}
		_ = c.run(ctx, le, nil)
		return append(names, "--help")
	}
	return nil
}

// processIDs returns the short IDs of the serve's processes, the client
// flags among words (--socket, --url, --owner) choosing the serve.
func processIDs(ctx context.Context, words []string) []string {
	fs := flag.NewFlagSet("complete", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	fs.SetOutput(discard{})
	var kept []string
	for i := 0; i < len(words); i++ {
		for _, n := range []string{"--socket", "--url", "--owner", "--token-file"} {
			if words[i] == n && i+1 < len(words) {
				kept = append(kept, words[i], words[i+1])
			} else if strings.HasPrefix(words[i], n+"=") {
				kept = append(kept, words[i])
			}
		}
	}
	_ = fs.Parse(kept)
	cl, err := cf.client()
	if err != nil {
		return nil
	}
	procs, err := cl.List(ctx)
	if err != nil {
		return nil
	}
	var ids []string
	for _, p := range procs {
		ids = append(ids, shortID(p.ID))
	}
	return ids
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
