package artifacts

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"strings"
	"sync"
)

// RefusedError is an output's file that the store refuses: a symlink out of the output,
// a socket, device or fifo, a name that is not valid UTF-8 or escapes. Path is the name
// as the tar stream gave it.
type RefusedError struct {
	Path   string
	Reason string
}

func (e *RefusedError) Error() string { return fmt.Sprintf("file %q: %s", e.Path, e.Reason) }

// TooLargeError is an output over the intake's limit.
type TooLargeError struct {
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("output is larger than the limit of %d bytes", e.Limit)
}

// Intake is an output taken into the store. Its blobs stay pinned (no collection removes
// them) until Release, so the caller can register Digest in its own transaction first.
type Intake struct {
	// Digest is the manifest's digest, "sha256:<hex>", under which the manifest is stored.
	Digest    string
	Size      int64
	FileCount int
	// StoredBytes is what this intake added to the store: 0 when every file was there.
	StoredBytes int64
	Manifest    Manifest

	release func()
}

// Release unpins the intake's blobs. Call it once the digest is registered (or when it
// will not be): from then on only references keep them. Calling it again does nothing.
func (in *Intake) Release() {
	if in != nil && in.release != nil {
		in.release()
	}
}

// maxTrailing is the most Intake reads after the archive's end (tar pads to its record
// size, 10 KiB for GNU tar).
const maxTrailing = 1 << 20

// maxLinkHops bounds a chain of symlinks, as the kernel's 40 does.
const maxLinkHops = 40

// intake is the state of one Intake call.
type intake struct {
	s       *Store
	typ     string
	limit   int64
	files   map[string]File
	links   map[string]link
	dirs    map[string]bool
	pinned  []string
	seen    map[string]bool
	pending []pendingBlob
	size    int64
}

type link struct {
	target string // as the tar gave it
	hard   bool   // a hard link names a path from the root
}

// pendingBlob is a file written to tmp/ and hashed, not yet renamed into place.
type pendingBlob struct {
	tmp  string
	name string
	size int64
}

// Intake reads an output as a tar stream and stores each file once. typ is TypeFolder
// (the stream is the output directory's contents) or TypeFile (the stream holds the
// one file). It refuses, naming the file, with a *RefusedError: a symlink whose target
// is absolute, outside the output, dangling or a directory (a symlink to a regular file
// inside is stored as a copy of it), a socket, device or fifo, a name that is not valid
// UTF-8, absolute or holding a ".." component; and with a *TooLargeError an output whose
// files sum to more than limit bytes (no limit when limit <= 0). Files are hashed while
// written, streamed through a fixed buffer, made durable with one sync of the file
// system and only then named as blobs. On error nothing stays pinned, and what the
// intake wrote goes at the next Collect.
func (s *Store) Intake(ctx context.Context, typ string, r io.Reader, limit int64) (_ *Intake, err error) {
	if typ != TypeFolder && typ != TypeFile {
		return nil, fmt.Errorf("output type %q: want %s or %s", typ, TypeFolder, TypeFile)
	}
	in := &intake{s: s, typ: typ, limit: limit, files: map[string]File{}, links: map[string]link{},
		dirs: map[string]bool{}, seen: map[string]bool{}}
	defer func() {
		if err != nil {
			in.abandon()
		}
	}()
	bufp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bufp)
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading output: %w", err)
		}
		if err := in.entry(ctx, hdr, tr, *bufp); err != nil {
			return nil, err
		}
	}
	// The stream is read to its end: a sender's error after the archive's last block
	// (a remote tar's exit status) is seen, and a stream that goes on is refused.
	if n, err := io.CopyN(io.Discard, r, maxTrailing+1); err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading output: %w", err)
	} else if n > maxTrailing {
		return nil, fmt.Errorf("reading output: more than %d bytes after the end of the archive", maxTrailing)
	}
	if err := in.resolveLinks(); err != nil {
		return nil, err
	}
	m := Manifest{Type: typ, Files: make([]File, 0, len(in.files))}
	for _, f := range in.files {
		m.Files = append(m.Files, f)
	}
	sortFiles(m.Files)
	if typ == TypeFile && len(m.Files) != 1 {
		return nil, fmt.Errorf("output of type %s holds %d files, want 1", TypeFile, len(m.Files))
	}
	enc, err := m.Encode()
	if err != nil {
		return nil, err
	}
	digest := digestOf(enc)
	if err := in.writeBlob(ctx, strings.NewReader(string(enc)), int64(len(enc)), *bufp); err != nil {
		return nil, fmt.Errorf("storing manifest: %w", err)
	}
	stored, err := in.commit()
	if err != nil {
		return nil, err
	}
	pinned := in.pinned
	var once sync.Once
	return &Intake{Digest: digest, Size: m.Size(), FileCount: len(m.Files), StoredBytes: stored, Manifest: m,
		release: func() { once.Do(func() { s.unpin(pinned) }) }}, nil
}

// entry takes one tar header (and, for a regular file, its content).
func (in *intake) entry(ctx context.Context, hdr *tar.Header, r io.Reader, buf []byte) error {
	name, skip, err := entryName(hdr.Name)
	if err != nil {
		return &RefusedError{Path: hdr.Name, Reason: err.Error()}
	}
	if skip {
		return nil
	}
	if in.seenName(name) {
		return &RefusedError{Path: hdr.Name, Reason: "appears twice in the output"}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		in.dirs[name] = true
	case tar.TypeReg, 0: // 0: a regular file as old tar writers mark it (TypeRegA)
		if in.limit > 0 && in.size+hdr.Size > in.limit {
			return &TooLargeError{Limit: in.limit}
		}
		in.size += hdr.Size
		h := newHasher()
		if err := in.writeBlobHashing(ctx, r, hdr.Size, buf, h); err != nil {
			return fmt.Errorf("storing file %q: %w", name, err)
		}
		in.files[name] = File{Path: name, Size: hdr.Size, Digest: h.digest(), Executable: hdr.Mode&0o111 != 0}
	case tar.TypeSymlink:
		in.links[name] = link{target: hdr.Linkname}
	case tar.TypeLink:
		in.links[name] = link{target: hdr.Linkname, hard: true}
	case tar.TypeChar, tar.TypeBlock:
		return &RefusedError{Path: hdr.Name, Reason: "is a device; an output holds regular files, directories and symlinks"}
	case tar.TypeFifo:
		return &RefusedError{Path: hdr.Name, Reason: "is a fifo; an output holds regular files, directories and symlinks"}
	case tar.TypeXGlobalHeader:
	default:
		return &RefusedError{Path: hdr.Name, Reason: fmt.Sprintf("has tar type %q; an output holds regular files, directories and symlinks", hdr.Typeflag)}
	}
	return nil
}

func (in *intake) seenName(name string) bool {
	_, f := in.files[name]
	_, l := in.links[name]
	return f || l || in.dirs[name]
}

// entryName turns a tar name ("./a/b", "a/b/") into a manifest path, or says to skip it
// (the root itself). It refuses names that are not valid UTF-8, absolute, or hold "..".
func entryName(raw string) (name string, skip bool, err error) {
	if strings.HasPrefix(raw, "/") {
		return "", false, errors.New("name is absolute")
	}
	for _, c := range strings.Split(raw, "/") {
		if c == ".." {
			return "", false, errors.New("name escapes its directory with a .. component")
		}
	}
	name = path.Clean(raw)
	if name == "." {
		return "", true, nil
	}
	if err := checkPath(name); err != nil {
		return "", false, err
	}
	return name, false, nil
}

// resolveLinks turns each link into a copy of the regular file it reaches inside the
// output, or refuses it.
func (in *intake) resolveLinks() error {
	for name, l := range in.links {
		f, reason := in.follow(name, l)
		if reason != "" {
			return &RefusedError{Path: name, Reason: reason}
		}
		f.Path = name
		in.size += f.Size
		if in.limit > 0 && in.size > in.limit {
			return &TooLargeError{Limit: in.limit}
		}
		in.files[name] = f
	}
	return nil
}

func (in *intake) follow(name string, l link) (File, string) {
	for range maxLinkHops {
		if path.IsAbs(l.target) {
			return File{}, fmt.Sprintf("is a symlink to the absolute path %q, outside the output", l.target)
		}
		target := l.target
		if !l.hard {
			target = path.Join(path.Dir(name), l.target)
		}
		target = path.Clean(target)
		if target == ".." || strings.HasPrefix(target, "../") {
			return File{}, fmt.Sprintf("is a symlink to %q, outside the output", l.target)
		}
		if f, ok := in.files[target]; ok {
			return f, ""
		}
		next, ok := in.links[target]
		if !ok {
			if in.isDir(target) {
				return File{}, fmt.Sprintf("is a symlink to the directory %q; an output's symlinks may only name regular files", l.target)
			}
			return File{}, fmt.Sprintf("is a symlink to %q, which does not exist in the output", l.target)
		}
		name, l = target, next
	}
	return File{}, "is a chain of more than 40 symlinks"
}

func (in *intake) isDir(p string) bool {
	if p == "." || in.dirs[p] {
		return true
	}
	for f := range in.files {
		if strings.HasPrefix(f, p+"/") {
			return true
		}
	}
	return false
}

// writeBlob stores size bytes of r as a pending blob.
func (in *intake) writeBlob(ctx context.Context, r io.Reader, size int64, buf []byte) error {
	return in.writeBlobHashing(ctx, r, size, buf, newHasher())
}

// writeBlobHashing copies size bytes of r into a tmp/ file while hashing them into h,
// pins the blob, and keeps the file pending unless the blob is stored already (or was
// met earlier in this intake).
func (in *intake) writeBlobHashing(ctx context.Context, r io.Reader, size int64, buf []byte, h *hasher) error {
	f, err := in.s.newTemp()
	if err != nil {
		return err
	}
	tmp := f.Name()
	n, err := io.CopyBuffer(io.MultiWriter(f, h), ctxReader{ctx, io.LimitReader(r, size)}, buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		os.Remove(tmp)
		in.s.forget(tmp)
		return err
	}
	name := h.hex()
	if !in.seen[name] {
		in.seen[name] = true
		in.s.pin(name)
		in.pinned = append(in.pinned, name)
		if !in.s.has(name) {
			in.pending = append(in.pending, pendingBlob{tmp: tmp, name: name, size: size})
			return nil
		}
	}
	os.Remove(tmp)
	in.s.forget(tmp)
	return nil
}

// commit makes the pending blobs durable and names them: one sync before the renames
// (a blob's name never comes before its content) and one after (the names survive a
// crash once Intake returns).
func (in *intake) commit() (stored int64, err error) {
	if len(in.pending) == 0 {
		return 0, nil
	}
	if err := in.s.syncfs(); err != nil {
		return 0, err
	}
	pending := in.pending
	in.pending = nil
	for i, p := range pending {
		added, err := in.s.place(p.tmp, p.name, p.size)
		if err != nil {
			for _, rest := range pending[i+1:] {
				os.Remove(rest.tmp)
				in.s.forget(rest.tmp)
			}
			return 0, fmt.Errorf("storing blob %s: %w", p.name, err)
		}
		if added {
			stored += p.size
		}
	}
	return stored, in.s.syncfs()
}

// abandon removes the pending tmp files and unpins: a failed intake keeps nothing.
func (in *intake) abandon() {
	for _, p := range in.pending {
		os.Remove(p.tmp)
		in.s.forget(p.tmp)
	}
	in.pending = nil
	in.s.unpin(in.pinned)
	in.pinned = nil
}

type hasher struct{ hash.Hash }

func newHasher() *hasher { return &hasher{sha256.New()} }

func (h *hasher) hex() string    { return hex.EncodeToString(h.Sum(nil)) }
func (h *hasher) digest() string { return digestPrefix + h.hex() }

// ctxReader stops a long copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
