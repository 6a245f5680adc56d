package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const cliGuide = "docs/guides/cli.md"

// cliDoc is what docs/guides/cli.md says about the command tree.
type cliDoc struct {
	lines []string
	// uses are its command lines, parsed.
	uses []lineUse
	// sections maps a command to the lines of the sections whose heading names it.
	sections map[*cobra.Command][]section
}

type lineUse struct {
	line int
	use
}

type section struct {
	heading    int // 1-based line of the heading
	start, end int // 0-based body lines [start, end)
}

var headingRe = regexp.MustCompile(`^#{1,6} `)

func readCLIDoc(root *cobra.Command, file string) (*cliDoc, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	d := &cliDoc{lines: strings.Split(string(b), "\n"), sections: map[*cobra.Command][]section{}}
	for _, cl := range extractCommandLines(file, string(b)) {
		if u, err := parseLine(root, cl.args); err == nil {
			d.uses = append(d.uses, lineUse{cl.line, u})
		}
	}
	var headings []int
	inFence := false
	for i, l := range d.lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
		}
		if !inFence && headingRe.MatchString(l) {
			headings = append(headings, i)
		}
	}
	for k, h := range headings {
		end := len(d.lines)
		if k+1 < len(headings) {
			end = headings[k+1]
		}
		for _, span := range codeSpans(d.lines[h]) {
			args, ok := commandAt(span)
			if !ok {
				continue
			}
			if u, err := parseLine(root, args); err == nil {
				d.sections[u.cmd] = append(d.sections[u.cmd], section{heading: h + 1, start: h + 1, end: end})
			}
		}
	}
	return d, nil
}

// documentsCommand reports whether a command line of the guide runs c, or, for a group
// that runs nothing by itself (compute, job), one of its commands.
func (d *cliDoc) documentsCommand(c *cobra.Command) bool {
	for _, u := range d.uses {
		if u.cmd == c || (!c.Runnable() && isUnder(u.cmd, c)) {
			return true
		}
	}
	return false
}

// documentsFlag reports whether the guide shows flag f of command c: a command line of c
// (or, for a persistent flag, of a command under c) passes it, or the section about c, or
// for the root's flags any line, names it in a code span.
func (d *cliDoc) documentsFlag(c *cobra.Command, f *pflag.Flag, persistent bool) bool {
	for _, u := range d.uses {
		if u.cmd == c || (persistent && isUnder(u.cmd, c)) {
			for _, uf := range u.flags {
				if uf == f {
					return true
				}
			}
		}
	}
	var ranges []section
	if c.HasParent() {
		ranges = d.sections[c]
	} else {
		ranges = []section{{start: 0, end: len(d.lines)}}
	}
	for _, s := range ranges {
		for _, l := range d.lines[s.start:s.end] {
			if mentionsFlag(l, f) {
				return true
			}
		}
	}
	return false
}

func isUnder(c, ancestor *cobra.Command) bool {
	for ; c != nil; c = c.Parent() {
		if c == ancestor {
			return true
		}
	}
	return false
}

// mentionsFlag reports whether a line has a code span that starts with the flag.
func mentionsFlag(line string, f *pflag.Flag) bool {
	for _, span := range codeSpans(line) {
		span = strings.TrimLeft(span, "[")
		for _, name := range flagNames(f) {
			if rest, ok := strings.CutPrefix(span, name); ok && (rest == "" || strings.ContainsRune(" =]", rune(rest[0]))) {
				return true
			}
		}
	}
	return false
}

func flagNames(f *pflag.Flag) []string {
	names := []string{"--" + f.Name}
	if f.Shorthand != "" {
		names = append(names, "-"+f.Shorthand)
	}
	return names
}

// hiddenLine returns whether some line of the guide says "hidden" and names the thing.
func (d *cliDoc) hiddenLine(names ...string) bool {
	for _, l := range d.lines {
		if !strings.Contains(strings.ToLower(l), "hidden") {
			continue
		}
		for _, n := range names {
			if strings.Contains(l, n) {
				return true
			}
		}
	}
	return false
}

func (d *cliDoc) mentionedAnywhere(f *pflag.Flag) bool {
	for _, l := range d.lines {
		if mentionsFlag(l, f) {
			return true
		}
	}
	return false
}

// where is the line a finding about c points at: its section, or its first command line,
// or that of its nearest documented parent.
func (d *cliDoc) where(c *cobra.Command) int {
	for ; c != nil; c = c.Parent() {
		if s := d.sections[c]; len(s) > 0 {
			return s[0].heading
		}
		for _, u := range d.uses {
			if u.cmd == c {
				return u.line
			}
		}
	}
	return 1
}

func checkCLICoverage() ([]finding, error) {
	root := newCLI()
	d, err := readCLIDoc(root, cliGuide)
	if err != nil {
		return nil, err
	}
	var out []finding
	add := func(c *cobra.Command, format string, args ...any) {
		out = append(out, finding{cliGuide, d.where(c), fmt.Sprintf(format, args...)})
	}
	walk(root, func(c *cobra.Command) {
		path := c.CommandPath()
		hidden := isHidden(c)
		switch {
		case hidden:
			if !d.hiddenLine("`"+path+"`", "`"+path+" ") {
				add(c, "hidden command %q is not listed as hidden (a line naming `%s` and saying hidden)", path, path)
			}
			return // its flags are its own business
		case c.HasParent() && !d.documentsCommand(c):
			add(c, "command %q is not documented: no command line runs it", path)
		}
		check := func(fs *pflag.FlagSet, persistent bool) {
			fs.VisitAll(func(f *pflag.Flag) {
				if (f.Name == "help" || f.Name == "version") && d.mentionedAnywhere(f) {
					return // cobra's own: one sentence says every command takes --help
				}
				if f.Hidden {
					if !d.hiddenLine("--" + f.Name) {
						add(c, "hidden flag --%s of %q is not listed as hidden", f.Name, path)
					}
					return
				}
				if !d.documentsFlag(c, f, persistent) {
					add(c, "flag %s of %q is not documented: no command line of it passes it and its section does not name it", strings.Join(flagNames(f), "/"), path)
				}
			})
		}
		check(c.LocalNonPersistentFlags(), false)
		check(c.PersistentFlags(), true)
	})
	return out, nil
}

func isHidden(c *cobra.Command) bool {
	for ; c != nil; c = c.Parent() {
		if c.Hidden {
			return true
		}
	}
	return false
}
