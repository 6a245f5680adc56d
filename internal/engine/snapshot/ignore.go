package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// rules are the ignore patterns in effect during a walk of a code directory.
type rules struct {
	// name is the ignore file read in every directory: AmlIgnore when the root has one,
	// else GitIgnore.
	name string
	// patterns are in increasing priority: a directory's file after its parent's, so
	// the deeper file wins, as in Git.
	patterns []gitignore.Pattern
	// read are the slash paths of the ignore files read.
	read []string
}

// newRules chooses the kind of ignore file for the code directory at root.
func newRules(root *os.Root) (*rules, error) {
	fi, err := root.Lstat(AmlIgnore)
	switch {
	case err == nil && fi.Mode().IsRegular():
		return &rules{name: AmlIgnore}, nil
	case err == nil || errors.Is(err, fs.ErrNotExist):
		return &rules{name: GitIgnore}, nil
	default:
		return nil, fmt.Errorf("checking for %s: %w", AmlIgnore, err)
	}
}

// load adds the patterns of the ignore file in directory dir ("." for the root), if it has
// one. An ignore file that is a symlink is not followed.
func (r *rules) load(root *os.Root, dir string) error {
	p := path.Join(dir, r.name)
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	data, err := root.ReadFile(p)
	if err != nil {
		return fmt.Errorf("reading %s: %w", p, err)
	}
	domain := splitPath(dir)
	text := strings.TrimPrefix(string(data), "\uFEFF")
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r.patterns = append(r.patterns, gitignore.ParsePattern(line, domain))
	}
	r.read = append(r.read, p)
	return nil
}

// ignored reports whether the slash path rel, relative to the code directory, is ignored.
func (r *rules) ignored(rel string, isDir bool) bool {
	return gitignore.NewMatcher(r.patterns).Match(splitPath(rel), isDir)
}

// applied is the kind of ignore file that took part, or empty when none was found.
func (r *rules) applied() string {
	if len(r.read) == 0 {
		return ""
	}
	return r.name
}

// splitPath splits a clean slash path into its elements; "." has none.
func splitPath(p string) []string {
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
