package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/cli"
)

// cmdLine is one mlcompute command line found in a file: its words after the program name.
type cmdLine struct {
	file string
	line int
	text string
	args []string
}

// progRe finds the program name at a place where a command starts; the name must be
// followed by a space (so mlcompute_compute or a path never matches).
var progRe = regexp.MustCompile("(?:^|[\\s`'\"(|;&])(mlcompute|terraform-provider-mlcompute engine)[ \t]+")

// shellFences are the fenced code block languages whose lines are shell commands (an
// untagged fence holds command synopses).
var shellFences = map[string]bool{"": true, "sh": true, "shell": true, "bash": true, "console": true, "text": true}

// extractCommandLines finds the mlcompute command lines of one file. In Markdown, a line
// of a shell fence is a command line when it starts with the program (after variable
// assignments or a "$ " prompt), and an inline code span is one when its text does; in
// other files (examples' comments and scripts), the program must start the line or its
// comment, or follow a quote.
func extractCommandLines(file, content string) []cmdLine {
	var out []cmdLine
	lines := strings.Split(content, "\n")
	markdown := strings.HasSuffix(file, ".md")
	inFence, shellFence := false, false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		if markdown && strings.HasPrefix(trimmed, "```") {
			if inFence {
				inFence = false
			} else {
				inFence, shellFence = true, shellFences[strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))]
			}
			continue
		}
		switch {
		case markdown && inFence:
			if !shellFence {
				continue
			}
			text := strings.TrimPrefix(trimmed, "$ ")
			start := i
			// A line ending in a backslash goes on; so does a synopsis whose next lines
			// start with "[".
			for i+1 < len(lines) && (strings.HasSuffix(text, "\\") || strings.HasPrefix(strings.TrimSpace(lines[i+1]), "[")) {
				text = strings.TrimSuffix(text, "\\") + " " + strings.TrimSpace(lines[i+1])
				i++
			}
			if args, ok := commandAt(skipAssignments(text)); ok {
				out = append(out, cmdLine{file: file, line: start + 1, text: text, args: args})
			}
		case markdown:
			for _, span := range codeSpans(l) {
				if args, ok := commandAt(skipAssignments(span)); ok {
					out = append(out, cmdLine{file: file, line: i + 1, text: span, args: args})
				}
			}
		default:
			// A script's line, or a comment's first words.
			text := trimmed
			if !strings.HasSuffix(file, ".sh") {
				text = strings.TrimLeft(trimmed, "#/ \t")
			}
			if args, ok := commandAt(skipAssignments(text)); ok && (text != trimmed || strings.HasSuffix(file, ".sh")) {
				out = append(out, cmdLine{file: file, line: i + 1, text: text, args: args})
				continue
			}
			for _, m := range progRe.FindAllStringSubmatchIndex(text, -1) {
				if m[0] > 0 && strings.ContainsRune("'\"`", rune(text[m[0]])) {
					q := text[m[0]]
					rest := text[m[2]:]
					if end := strings.IndexByte(rest, q); end >= 0 {
						rest = rest[:end]
					}
					if args, ok := commandAt(rest); ok {
						out = append(out, cmdLine{file: file, line: i + 1, text: rest, args: args})
					}
				}
			}
		}
	}
	return out
}

var assignmentRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=\S*\s+`)

func skipAssignments(s string) string {
	for {
		loc := assignmentRe.FindStringIndex(s)
		if loc == nil {
			return s
		}
		s = s[loc[1]:]
	}
}

// commandAt returns the words of the command line that starts s, if s starts with the
// program's name followed by arguments, the first a word or a flag (so HCL's
// "mlcompute = {" is none).
func commandAt(s string) ([]string, bool) {
	for _, prog := range []string{"mlcompute", "terraform-provider-mlcompute engine"} {
		if rest, ok := strings.CutPrefix(s, prog); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "\t")) {
			args := shellWords(rest)
			return args, len(args) > 0 && firstArgRe.MatchString(args[0])
		}
	}
	return nil, false
}

var placeholderRe = regexp.MustCompile(`^[A-Z][A-Z_]*$`)

var firstArgRe = regexp.MustCompile(`^(\[?-|[a-z])`)

// shellWords splits a command line into words, honouring quotes, and stops where the
// command ends: a comment, a pipe, a list operator, a redirection or a closing parenthesis.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if quote != 0 {
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
			continue
		}
		switch {
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case !inWord && (c == '#' || c == '|' || c == ';' || c == '&' || c == '>' || c == '<' || c == ')'):
			return words
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// codeSpans returns the texts of a Markdown line's inline code spans.
func codeSpans(line string) []string {
	var spans []string
	for {
		start := strings.IndexByte(line, '`')
		if start < 0 {
			return spans
		}
		n := 1
		for start+n < len(line) && line[start+n] == '`' {
			n++
		}
		delim := line[start : start+n]
		rest := line[start+n:]
		end := strings.Index(rest, delim)
		if end < 0 {
			return spans
		}
		spans = append(spans, strings.TrimSpace(rest[:end]))
		line = rest[end+n:]
	}
}

// newCLI is the command tree users see: the help and completion commands, and the help
// and version flags, which cobra otherwise adds when it runs.
func newCLI() *cobra.Command {
	root := cli.NewRootCommand(cli.Config{Use: "mlcompute", Version: "docs", Self: func() ([]string, error) { return []string{"mlcompute"}, nil }})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.InitDefaultVersionFlag()
	walk(root, func(c *cobra.Command) { c.InitDefaultHelpFlag() })
	return root
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// use is what parsing a command line found: the command it runs and the flags it passes.
type use struct {
	cmd   *cobra.Command
	flags []*pflag.Flag
}

// parseLine resolves a command line against the tree. Placeholders of synopses are
// understood: "[--flag X]" and "[...]" brackets, "...", and "--" (what follows is the
// user's command).
func parseLine(root *cobra.Command, args []string) (use, error) {
	u := use{cmd: root}
	for i := 0; i < len(args); i++ {
		a := strings.Trim(args[i], "[]")
		a = strings.TrimSuffix(a, "...")
		a = strings.TrimSuffix(a, "]")
		switch {
		case a == "" || a == "--" || args[i] == "...":
			if a == "--" || args[i] == "..." {
				return u, nil
			}
		case strings.HasPrefix(a, "-"):
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			var f *pflag.Flag
			if strings.HasPrefix(a, "--") {
				f = u.cmd.Flags().Lookup(name)
				if f == nil {
					f = u.cmd.InheritedFlags().Lookup(name)
				}
			} else if len(name) == 1 {
				f = u.cmd.Flags().ShorthandLookup(name)
				if f == nil {
					f = u.cmd.InheritedFlags().ShorthandLookup(name)
				}
			}
			if f == nil {
				return u, fmt.Errorf("%q has no flag %s", u.cmd.CommandPath(), strings.SplitN(a, "=", 2)[0])
			}
			u.flags = append(u.flags, f)
			if !hasValue && f.NoOptDefVal == "" && !strings.HasSuffix(args[i], "]") {
				i++ // the flag's value
			}
		default:
			if sub := findSub(u.cmd, a); sub != nil {
				u.cmd = sub
				continue
			}
			// Alternatives of a synopsis ("start|stop|restart"): each must exist; the
			// rest of the line is checked against the first.
			if alts := strings.Split(a, "|"); len(alts) > 1 && u.cmd.HasSubCommands() {
				var first *cobra.Command
				for _, alt := range alts {
					sub := findSub(u.cmd, alt)
					if sub == nil {
						return u, fmt.Errorf("%q has no command %q", u.cmd.CommandPath(), alt)
					}
					if first == nil {
						first = sub
					}
				}
				u.cmd = first
				continue
			}
			if u.cmd.HasSubCommands() && placeholderRe.MatchString(a) {
				return u, nil // "mlcompute completion SHELL": any of its commands
			}
			if u.cmd.HasSubCommands() && !u.cmd.Runnable() {
				return u, fmt.Errorf("%q has no command %q", u.cmd.CommandPath(), a)
			}
			// A positional argument.
		}
	}
	return u, nil
}

func findSub(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// docFiles are the files whose command lines are checked.
func docFiles() ([]string, error) {
	files := []string{"README.md"}
	for _, dir := range []string{"docs", "examples"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if strings.HasPrefix(d.Name(), ".") && path != dir {
					return filepath.SkipDir
				}
				return nil
			}
			if isText(path) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

func isText(path string) bool {
	switch filepath.Ext(path) {
	case ".md", ".tf", ".sh", ".py", ".txt", ".tfvars", ".hcl", ".yaml", ".yml", "":
		return true
	}
	return false
}

func checkCommandLines() ([]finding, error) {
	files, err := docFiles()
	if err != nil {
		return nil, err
	}
	root := newCLI()
	var out []finding
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		for _, cl := range extractCommandLines(file, string(b)) {
			if _, err := parseLine(root, cl.args); err != nil {
				out = append(out, finding{file, cl.line, fmt.Sprintf("%v, in: %s", err, cl.text)})
			}
		}
	}
	return out, nil
}
