package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
)

// Unpack extracts the gzip'd tar read from r into dst, creating dst if needed; dst should
// be empty. It is written for archives from untrusted clients:
//
//   - every write goes through an os.Root on dst, so nothing lands outside it;
//   - an entry with an absolute path or a `..` element, a symlink whose target is absolute
//     or resolves outside dst (following other links in the archive), a duplicate entry, or
//     a type other than file, directory and symlink fails with ErrInvalidArchive;
//   - limits are enforced as entries arrive: a *LimitError is returned before the
//     contents that would exceed them are written;
//   - only the owner's permission bits are applied (files at least 0600, directories 0700),
//     never group or other bits, owners, or setuid, setgid and sticky bits: what the engine
//     stores is private to its user;
//   - a failure of the engine's own disk (no space, permissions, read-only) is returned
//     as such, not as ErrInvalidArchive: it is no fault of the archive.
//
// On error dst may hold part of the archive; the caller removes it (Store.Put does).
func Unpack(r io.Reader, dst string, limits Limits) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dst, err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dst, err)
	}
	defer root.Close()

	src := &sourceReader{r: r}
	gz, err := gzip.NewReader(src)
	if err != nil {
		return src.blame(invalidf("reading gzip header: %v", err))
	}
	defer gz.Close()
	tr := tar.NewReader(gz)

	var (
		files, dirs int
		bytes       int64
		links       []string
		dirModes    = map[string]fs.FileMode{}
	)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return src.blame(invalidf("reading tar: %v", err))
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := cleanName(hdr.Name)
		if err != nil {
			return err
		}
		perm := fs.FileMode(hdr.Mode).Perm() & 0o700
		switch hdr.Typeflag {
		case tar.TypeDir:
			if name == "." {
				continue
			}
			if dirs++; limits.MaxFiles > 0 && dirs > limits.MaxFiles {
				return &LimitError{Kind: LimitDirs, Count: int64(dirs), Limit: int64(limits.MaxFiles)}
			}
			if err := root.MkdirAll(name, 0o700); err != nil {
				return hostOrInvalid(err, "creating directory %s", name)
			}
			// The owner keeps full access so the snapshot can be deleted later.
			dirModes[name] = 0o700
		case tar.TypeReg:
			if files++; limits.MaxFiles > 0 && files > limits.MaxFiles {
				return &LimitError{Kind: LimitFiles, Count: int64(files), Limit: int64(limits.MaxFiles)}
			}
			if hdr.Size < 0 {
				return invalidf("entry %s has a negative size", name)
			}
			if bytes += hdr.Size; limits.MaxBytes > 0 && bytes > limits.MaxBytes {
				return &LimitError{Kind: LimitBytes, Count: bytes, Limit: limits.MaxBytes}
			}
			if err := writeFile(root, name, tr, hdr.Size, perm); err != nil {
				return src.blame(err)
			}
		case tar.TypeSymlink:
			if files++; limits.MaxFiles > 0 && files > limits.MaxFiles {
				return &LimitError{Kind: LimitFiles, Count: int64(files), Limit: int64(limits.MaxFiles)}
			}
			if err := checkLink(root, name, hdr.Linkname); err != nil {
				return invalidf("symlink %s %v", name, err)
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return hostOrInvalid(err, "creating symlink %s", name)
			}
			links = append(links, name)
		default:
			return invalidf("entry %s has unsupported type %q; only files, directories and symlinks are allowed", name, hdr.Typeflag)
		}
	}

	// Reading to the end of the gzip stream verifies its checksum; a little padding
	// after the tar's end is normal, a lot is not.
	if n, err := io.Copy(io.Discard, io.LimitReader(gz, maxTrailer+1)); err != nil {
		return src.blame(invalidf("reading gzip stream: %v", err))
	} else if n > maxTrailer {
		return invalidf("more than %s of data after the end of the tar", formatBytes(maxTrailer))
	}

	// A link checked on arrival may resolve differently once later entries exist, so
	// every link is checked again against the final tree.
	for _, name := range links {
		target, err := root.Readlink(name)
		if err != nil {
			return fmt.Errorf("reading symlink %s: %w", name, err)
		}
		if err := checkLink(root, name, target); err != nil {
			return invalidf("symlink %s %v", name, err)
		}
	}
	// Directory modes last and deepest first, so a read-only directory does not stop
	// its own contents from being written.
	names := make([]string, 0, len(dirModes))
	for name := range dirModes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range slices.Backward(names) {
		if err := root.Chmod(name, dirModes[name]); err != nil {
			return fmt.Errorf("setting mode of %s: %w", name, err)
		}
	}
	return nil
}

// maxTrailer bounds the data allowed after the end of the tar, inside the gzip stream.
const maxTrailer = 1 << 20

// cleanName checks an entry name and returns it as a clean relative slash path.
func cleanName(name string) (string, error) {
	switch {
	case name == "":
		return "", invalidf("entry has an empty name")
	case strings.ContainsRune(name, 0):
		return "", invalidf("entry %q has a NUL in its name", name)
	case path.IsAbs(name) || strings.HasPrefix(name, `\`) || (len(name) > 1 && name[1] == ':'):
		return "", invalidf("entry %q has an absolute path", name)
	}
	for elem := range strings.SplitSeq(name, "/") {
		if elem == ".." {
			return "", invalidf("entry %q has a .. element", name)
		}
	}
	return path.Clean(name), nil
}

// writeFile creates the regular file name, which must not exist yet, from size bytes of r.
func writeFile(root *os.Root, name string, r io.Reader, size int64, perm fs.FileMode) error {
	if err := mkParent(root, name); err != nil {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return invalidf("entry %s appears twice", name)
		}
		return hostOrInvalid(err, "creating %s", name)
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, tar.ErrHeader) {
		return invalidf("reading %s: %v", name, err)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if n != size {
		return invalidf("entry %s is truncated", name)
	}
	if err := root.Chmod(name, perm|0o600); err != nil {
		return fmt.Errorf("setting mode of %s: %w", name, err)
	}
	return nil
}

// mkParent creates the parent directories of name that the archive did not list.
func mkParent(root *os.Root, name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	if err := root.MkdirAll(dir, 0o700); err != nil {
		return hostOrInvalid(err, "creating directory %s", dir)
	}
	return nil
}

// hostOrInvalid returns err about what (a format and its arguments) as a fault of this
// machine when it is one (disk full, permissions, a read-only or failing disk), else as an
// invalid archive (a file where the archive puts a directory, a name too long).
func hostOrInvalid(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EACCES, syscall.EPERM,
		syscall.EROFS, syscall.EIO, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM} {
		if errors.Is(err, errno) {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return invalidf("%s: %v", what, err)
}

// sourceReader remembers a failure of the reader under the gzip stream, so that a
// connection dropped mid-upload is not reported as an invalid archive.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// blame returns the source's own error, when it had one, in place of err.
func (s *sourceReader) blame(err error) error {
	if s.err != nil {
		return fmt.Errorf("reading archive: %w", s.err)
	}
	return err
}
