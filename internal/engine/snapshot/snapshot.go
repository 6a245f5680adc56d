// Package snapshot packs a job's code directory into a gzip'd tar, unpacks one safely on
// the server, and keeps unpacked snapshots in a content-addressed Store.
//
// What goes in: Pack honours `.amlignore` when the code directory has one at its root,
// else `.gitignore`, with gitignore(5) semantics (negation, `dir/` patterns, `**`), and
// files of the chosen name in subdirectories apply below them as in Git. `.git` is always
// left out. Only regular files, directories and symlinks are stored:
//
//   - mode bits: the permission bits (0o777) are kept, so executables stay executable;
//     setuid, setgid and sticky bits are dropped, and owners are not recorded.
//   - symlinks: stored as symlinks when their target is relative and resolves inside the
//     code directory; a symlink that is absolute or leaves the directory is skipped and
//     listed in Manifest.Skipped, as are sockets, pipes and devices. Symlinks are never
//     followed, so the archive cannot pull in files from outside the directory.
//
// The archive is deterministic: entries in lexical order, modification times in whole
// seconds, no owners, and no gzip timestamp, so packing an unchanged directory twice gives
// the same bytes and therefore the same Store ID.
package snapshot

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Limits bound a snapshot. A zero field means no limit; the client and the server both use
// DefaultLimits.
type Limits struct {
	// MaxBytes bounds the total size of the regular files' contents.
	MaxBytes int64
	// MaxFiles bounds the number of regular files and symlinks. The number of
	// directories is bounded by the same number.
	MaxFiles int
}

// DefaultLimits are the limits of DESIGN.md section 6: 300 MiB and 2000 files.
var DefaultLimits = Limits{MaxBytes: 300 << 20, MaxFiles: 2000}

// The names of the ignore files, in order of precedence.
const (
	AmlIgnore = ".amlignore"
	GitIgnore = ".gitignore"
)

// Manifest describes an archive that Pack wrote.
type Manifest struct {
	// Files is the number of regular files and symlinks in the archive.
	Files int
	// Dirs is the number of directories in the archive.
	Dirs int
	// Bytes is the total size of the regular files' contents.
	Bytes int64
	// ArchiveBytes is the size of the gzip'd tar written.
	ArchiveBytes int64
	// SHA256 is the hex SHA-256 of the archive; Store.Put returns it as the ID.
	SHA256 string
	// IgnoreFile is the kind of ignore file applied (AmlIgnore or GitIgnore), or empty
	// when the directory has none.
	IgnoreFile string
	// IgnoreFiles are the paths, relative to the code directory, of the ignore files read.
	IgnoreFiles []string
	// Skipped lists what was neither ignored nor stored, with the reason.
	Skipped []Skipped
}

// Skipped is one path that Pack could not store.
type Skipped struct {
	Path   string
	Reason string
}

// LimitKind names the bound a LimitError is about.
type LimitKind string

const (
	LimitFiles       LimitKind = "files"
	LimitDirs        LimitKind = "directories"
	LimitBytes       LimitKind = "bytes"
	LimitUploadBytes LimitKind = "upload bytes"
)

// Usage is how much of a limited quantity one top-level entry of a code directory holds.
type Usage struct {
	// Path is relative to the code directory; directories end in a slash.
	Path   string
	Amount int64
}

// LimitError reports a snapshot over its Limits. Pack returns it before writing anything;
// Unpack and Store.Put return it as soon as the archive goes over.
type LimitError struct {
	// Dir is the code directory for Pack, empty for an archive received.
	Dir string
	// IgnoreFile is the kind of ignore file Pack applied, empty when there was none.
	IgnoreFile string
	Kind       LimitKind
	// Count is the amount found: the full total for Pack, the amount read so far when
	// the archive went over for Unpack.
	Count int64
	Limit int64
	// Largest are the top-level entries of Dir holding the most of Kind, largest first.
	Largest []Usage
}

func (e *LimitError) Error() string {
	if e.Dir == "" {
		what := "snapshot archive has"
		switch e.Kind {
		case LimitBytes:
			what = "snapshot archive holds"
		case LimitUploadBytes:
			what = "snapshot upload is"
		}
		return fmt.Sprintf("%s more than the limit of %s", what, e.amount(e.Limit))
	}
	applied := "after applying " + e.IgnoreFile
	fix := "add an .amlignore to leave out data and outputs"
	switch e.IgnoreFile {
	case "":
		applied = "with no .amlignore or .gitignore"
	case AmlIgnore:
		fix = "add patterns to .amlignore to leave out data and outputs"
	}
	verb := "has"
	if e.Kind == LimitBytes {
		verb = "holds"
	}
	msg := fmt.Sprintf("code directory %q %s %s %s; the limit is %s: %s",
		e.Dir, verb, e.amount(e.Count), applied, e.amount(e.Limit), fix)
	if len(e.Largest) > 0 {
		parts := make([]string, len(e.Largest))
		for i, u := range e.Largest {
			parts[i] = u.Path + " " + e.amount(u.Amount)
		}
		msg += " (largest: " + strings.Join(parts, ", ") + ")"
	}
	return msg
}

func (e *LimitError) amount(n int64) string {
	switch e.Kind {
	case LimitBytes, LimitUploadBytes:
		return formatBytes(n)
	case LimitDirs:
		if n == 1 {
			return "1 directory"
		}
		return formatCount(n) + " directories"
	default:
		if n == 1 {
			return "1 file"
		}
		return formatCount(n) + " files"
	}
}

// IsLimitError reports whether err is or wraps a *LimitError.
func IsLimitError(err error) bool {
	var le *LimitError
	return errors.As(err, &le)
}

// ErrInvalidArchive is wrapped by Unpack and Store.Put errors about an archive that is
// malformed or unsafe: an absolute or `..` path, a symlink leaving the destination, a
// duplicate entry, or an entry type other than file, directory and symlink.
var ErrInvalidArchive = errors.New("invalid snapshot archive")

// IsInvalidArchive reports whether err wraps ErrInvalidArchive.
func IsInvalidArchive(err error) bool { return errors.Is(err, ErrInvalidArchive) }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalidArchive)
}

// largest returns the three top-level entries with the greatest amounts.
func largest(amounts map[string]int64) []Usage {
	us := make([]Usage, 0, len(amounts))
	for p, n := range amounts {
		us = append(us, Usage{Path: p, Amount: n})
	}
	slices.SortFunc(us, func(a, b Usage) int {
		if c := cmp.Compare(b.Amount, a.Amount); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	return us[:min(3, len(us))]
}

// formatCount writes n with thousands separators: 2345 -> "2,345".
func formatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatBytes writes n in binary units: 314572800 -> "300 MiB", 1536 -> "1.5 KiB".
func formatBytes(n int64) string {
	if n < 1024 {
		return formatCount(n) + " bytes"
	}
	v := float64(n)
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + units[i]
}
