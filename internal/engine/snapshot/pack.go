package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
)

// entry is one path Pack stores.
type entry struct {
	rel     string // slash path relative to the code directory
	typ     byte   // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	perm    fs.FileMode
	size    int64
	modTime time.Time
	target  string // symlink target
}

// plan is what a walk of the code directory decided to store.
type plan struct {
	entries []entry
	files   int
	dirs    int
	bytes   int64
	rules   *rules
	skipped []Skipped
	// per top-level entry, for LimitError.Largest
	topFiles, topDirs, topBytes map[string]int64
}

// Pack writes a gzip'd tar of the code directory dir to w, leaving out what the ignore
// files exclude and `.git`, and returns what it wrote. It walks dir first and returns a
// *LimitError, having written nothing, when what is left exceeds limits. See the package
// documentation for how ignore files, modes and symlinks are handled.
func Pack(dir string, w io.Writer, limits Limits) (Manifest, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("opening code directory: %w", err)
	}
	defer root.Close()

	p, err := walk(root)
	if err != nil {
		return Manifest{}, fmt.Errorf("reading code directory %q: %w", dir, err)
	}
	if err := p.check(dir, limits); err != nil {
		return Manifest{}, err
	}

	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(w, h)}
	gz := gzip.NewWriter(cw)
	tw := tar.NewWriter(gz)
	for _, e := range p.entries {
		if err := writeEntry(tw, root, e); err != nil {
			return Manifest{}, fmt.Errorf("packing %s: %w", e.rel, err)
		}
	}
	if err := tw.Close(); err != nil {
		return Manifest{}, fmt.Errorf("finishing archive: %w", err)
	}
	if err := gz.Close(); err != nil {
		return Manifest{}, fmt.Errorf("finishing archive: %w", err)
	}
	return Manifest{
		Files:        p.files,
		Dirs:         p.dirs,
		Bytes:        p.bytes,
		ArchiveBytes: cw.n,
		SHA256:       hex.EncodeToString(h.Sum(nil)),
		IgnoreFile:   p.rules.applied(),
		IgnoreFiles:  p.rules.read,
		Skipped:      p.skipped,
	}, nil
}

// walk lists what to store, in lexical order with every directory before its contents.
func walk(root *os.Root) (*plan, error) {
	rs, err := newRules(root)
	if err != nil {
		return nil, err
	}
	p := &plan{rules: rs, topFiles: map[string]int64{}, topDirs: map[string]int64{}, topBytes: map[string]int64{}}
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel == "." {
			return rs.load(root, ".")
		}
		if d.Name() == ".git" || rs.ignored(rel, d.IsDir()) {
			if d.IsDir() {
				// As in Git, nothing below an ignored directory can be re-included.
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{rel: rel, perm: info.Mode().Perm(), modTime: info.ModTime()}
		top := topLevel(rel, d.IsDir())
		switch {
		case d.IsDir():
			e.typ = tar.TypeDir
			p.dirs++
			p.topDirs[top]++
			if err := rs.load(root, rel); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			e.typ, e.size = tar.TypeReg, info.Size()
			p.files++
			p.bytes += e.size
			p.topFiles[top]++
			p.topBytes[top] += e.size
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(rel)
			if err != nil {
				return err
			}
			if err := checkLink(root, rel, target); err != nil {
				p.skipped = append(p.skipped, Skipped{Path: rel, Reason: "symlink " + err.Error()})
				return nil
			}
			e.typ, e.target = tar.TypeSymlink, target
			p.files++
			p.topFiles[top]++
		default:
			p.skipped = append(p.skipped, Skipped{Path: rel, Reason: "not a regular file, directory or symlink"})
			return nil
		}
		p.entries = append(p.entries, e)
		return nil
	})
	return p, err
}

// check returns a *LimitError when the plan exceeds limits.
func (p *plan) check(dir string, limits Limits) error {
	over := func(kind LimitKind, count, limit int64, tops map[string]int64) error {
		return &LimitError{Dir: dir, IgnoreFile: p.rules.applied(), Kind: kind, Count: count, Limit: limit, Largest: largest(tops)}
	}
	if limits.MaxFiles > 0 && p.files > limits.MaxFiles {
		return over(LimitFiles, int64(p.files), int64(limits.MaxFiles), p.topFiles)
	}
	if limits.MaxBytes > 0 && p.bytes > limits.MaxBytes {
		return over(LimitBytes, p.bytes, limits.MaxBytes, p.topBytes)
	}
	if limits.MaxFiles > 0 && p.dirs > limits.MaxFiles {
		return over(LimitDirs, int64(p.dirs), int64(limits.MaxFiles), p.topDirs)
	}
	return nil
}

// writeEntry writes one header and, for a file, its contents.
func writeEntry(tw *tar.Writer, root *os.Root, e entry) error {
	hdr := &tar.Header{
		Typeflag: e.typ,
		Name:     e.rel,
		Mode:     int64(e.perm),
		ModTime:  e.modTime.Truncate(time.Second),
	}
	switch e.typ {
	case tar.TypeDir:
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
	case tar.TypeSymlink:
		hdr.Linkname = e.target
		return tw.WriteHeader(hdr)
	}
	f, err := root.Open(e.rel)
	if err != nil {
		return err
	}
	defer f.Close()
	// The walk decided on the size and the limits; a file that changed since would
	// make the archive disagree with the checks, so it is an error.
	if fi, err := f.Stat(); err != nil {
		return err
	} else if !fi.Mode().IsRegular() || fi.Size() != e.size {
		return errors.New("file changed while packing; try again")
	}
	hdr.Size = e.size
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(f, e.size))
	if err != nil {
		return err
	}
	if n != e.size {
		return errors.New("file changed while packing; try again")
	}
	return nil
}

// topLevel names the top-level entry that holds rel: "data/" for "data/x/y.csv".
func topLevel(rel string, isDir bool) string {
	first, _, nested := strings.Cut(rel, "/")
	if nested || isDir {
		return first + "/"
	}
	return first
}

// linkFS is the part of *os.Root that checkLink needs.
type linkFS interface {
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
}

// maxLinkHops bounds the symlinks followed while resolving one link, as the kernel does.
const maxLinkHops = 40

// checkLink reports an error unless the symlink at the slash path name, pointing at
// target, resolves inside fsys. It follows the links it meets on the way as the kernel
// would, so a chain like `a -> d/b/..` with `d/b -> ..` is caught, and treats the path
// after a missing element lexically, which is the stricter reading.
func checkLink(fsys linkFS, name, target string) error {
	if target == "" {
		return errors.New("has an empty target")
	}
	if path.IsAbs(target) || strings.HasPrefix(target, `\`) || (len(target) > 1 && target[1] == ':') {
		return errors.New("points to an absolute path")
	}
	cur := splitPath(path.Dir(name))
	queue := strings.Split(target, "/")
	hops := 0
	for len(queue) > 0 {
		elem := queue[0]
		queue = queue[1:]
		switch elem {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return errors.New("points outside the directory")
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, elem)
		p := strings.Join(cur, "/")
		fi, err := fsys.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if hops++; hops > maxLinkHops {
			return errors.New("is part of a loop of symlinks")
		}
		next, err := fsys.Readlink(p)
		if err != nil {
			return err
		}
		if path.IsAbs(next) {
			return errors.New("points outside the directory through " + p)
		}
		cur = cur[:len(cur)-1]
		queue = append(strings.Split(next, "/"), queue...)
	}
	return nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
