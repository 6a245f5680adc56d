// Package lazyregexp holds regular expressions compiled on first use.
//
// The mlcompute binary links every validator and driver, and a short command (`job submit`,
// `compute show`) uses almost none of them; compiling them all at process start cost about a
// millisecond of every command (patterns with counted repetition such as {0,253} compile to
// large programs). Go's own command does the same (cmd/go's internal/lazyregexp).
package lazyregexp

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled the first time it is used. Its pattern is
// checked then: a bad pattern panics, as regexp.MustCompile does, and the package's tests
// use every pattern they declare.
type Regexp struct {
	expr     string
	compiled func() *regexp.Regexp
}

// New returns a Regexp for expr, compiled on first use.
func New(expr string) *Regexp {
	return &Regexp{expr: expr, compiled: sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(expr)
	})}
}

// MatchString reports whether s contains a match of the expression.
func (r *Regexp) MatchString(s string) bool { return r.compiled().MatchString(s) }

// FindStringSubmatch is regexp.Regexp's FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.compiled().FindStringSubmatch(s) }

// String returns the source text of the expression.
func (r *Regexp) String() string { return r.expr }
