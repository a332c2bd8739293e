package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// The manual page is made, like completion, from the command table and from
// each command's --help, which its own flag set prints: the page cannot
// disagree with the code any more than --help can.

const manHelp = `Print the manual page of agentproc (roff, section 1): every command with
its flags and examples, made from the same command table and flag sets as
--help.

Examples:
  agentproc man | man -l -
  mkdir -p ~/.local/share/man/man1 && agentproc man > ~/.local/share/man/man1/agentproc.1
`

// runMan is set as the man command's run in init: it reads the command
// table, which cannot name it in its own initializer (an initialization
// cycle).
func runMan(_ context.Context, e *env, args []string) error {
	fs := newFlags("man", "", manHelp)
	if rest, err := parse(fs, e, args, 0); err != nil {
		return err
	} else if err := noArgs(rest); err != nil {
		return err
	}
	// The work dir's default is where --help runs (mcp) or the home
	// directory (serve); a page says which, not the paths (or the
	// environment) of the machine it was made on.
	var defaults []string
	if wd, err := os.Getwd(); err == nil {
		defaults = append(defaults, "(default "+wd+")", "(default: the current directory)")
	}
	if home, err := os.UserHomeDir(); err == nil {
		defaults = append(defaults, "(default "+home+")", "(default: your home directory)")
	}
	// --url's default is $AGENTPROC_URL, which its text names already.
	if u := os.Getenv("AGENTPROC_URL"); u != "" {
		defaults = append(defaults, " (default "+u+")", "")
	}
	general, _, _ := strings.Cut(mainUsage, "\nUsage:")
	var b strings.Builder
	fmt.Fprintf(&b, ".TH AGENTPROC 1 \"\" %s \"User Commands\"\n", roffQuote("agentproc "+version()))
	b.WriteString(".SH NAME\nagentproc \\- run and supervise commands for coding agents\n")
	b.WriteString(".SH SYNOPSIS\n.B agentproc\n.I COMMAND\n[flags] [args]\n")
	b.WriteString(".SH DESCRIPTION\n" + roffText(general))
	b.WriteString(".SH COMMANDS\n")
	for _, c := range commands {
		var help strings.Builder
		if code := run([]string{c.name, "--help"}, strings.NewReader(""), &help, &help); code != exitOK {
			return fmt.Errorf("%s --help: exit %d", c.name, code)
		}
		text := help.String()
		if len(defaults) > 0 {
			text = strings.NewReplacer(defaults...).Replace(text)
		}
		manCommand(&b, c, text)
	}
	b.WriteString(".SH ENVIRONMENT\n")
	for _, v := range [][2]string{
		{socketEnv, "the Unix socket of serve that the client commands use"},
		{"AGENTPROC_URL", "the URL of a serve --listen that the client commands use instead"},
		{tokenEnv, "the bearer token of serve --listen and its clients"},
	} {
		fmt.Fprintf(&b, ".TP\n.B %s\n%s", v[0], roffText(v[1]+"\n"))
	}
	b.WriteString(".SH SEE ALSO\nhttps://github.com/agentproc/agentproc\n")
	_, err := fmt.Fprint(e.stdout, b.String())
	return err
}

// manCommand writes c's section of the page from its --help: the usage
// line, the description in filled paragraphs, each flag as a tagged
// paragraph, and the examples as written.
func manCommand(b *strings.Builder, c command, help string) {
	usage, rest, _ := strings.Cut(strings.TrimPrefix(help, "Usage:\n"), "\n")
	desc, rest, _ := strings.Cut(rest, "\nFlags:\n")
	flags, examples, _ := strings.Cut(rest, "\nExamples:\n")
	fmt.Fprintf(b, ".SS %s\n%s.PP\n.B %s\n", roffQuote(c.name), roffText(c.summary+"\n"), roffText(strings.TrimSpace(usage)))
	for _, para := range strings.Split(strings.TrimSpace(desc), "\n\n") {
		b.WriteString(".PP\n" + roffText(para+"\n"))
	}
	for _, line := range strings.Split(strings.TrimRight(flags, "\n"), "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			fmt.Fprintf(b, ".TP\n.B %s\n%s", roffText(m[1]), roffText(m[2]+"\n"))
		}
	}
	if examples = strings.TrimRight(examples, "\n"); examples != "" {
		b.WriteString(".PP\nExamples:\n.PP\n.RS\n.nf\n" + roffText(examples+"\n") + ".fi\n.RE\n")
	}
}

// flagLine is a flag's line of --help (newFlags): the flag and the kind
// of value it takes, if any, then its text.
var flagLine = regexp.MustCompile(`^  (-{1,2}[\w-]+(?: [a-z]+)?) +(.*)$`)

func init() {
	for i := range commands {
		if commands[i].name == "man" {
			commands[i].run = runMan
		}
	}
}

// roffText escapes s for roff: backslashes, and a line starting with a
// dot or an apostrophe, which roff would read as a request.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "")
}

// roffQuote is s as one quoted argument of a roff request.
func roffQuote(s string) string {
	return `"` + strings.ReplaceAll(roffText(s), `"`, `""`) + `"`
}
