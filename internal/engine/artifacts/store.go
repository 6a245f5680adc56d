// Package artifacts is the engine's content-addressed store of job outputs, in a
// directory of its data dir. Nodes never write into it: the engine takes an output in
// from a tar stream (Intake), and gives it back as a tar stream (WriteTar) or a tree on
// its own machine (Export, Stage).
//
// Layout under the store's directory:
//
//	blobs/<2 hex>/<64 hex>  a file's content, or a manifest's canonical encoding, named by its sha256
//	tmp/                    blobs being written; what a crash leaves here goes at Open and Collect
//	staging/<64 hex>/       outputs exported for tasks' inputs, while Stage's callers hold them
//
// A blob present under its name always has that content: it is written to tmp/, made
// durable, and only then renamed into place, so identical files are stored once and a
// crash leaves at most blobs nothing references. Those, and every other blob no
// referenced manifest reaches, go at the next Collect, except the blobs an Intake still
// pins (its caller has not registered its digest yet).
package artifacts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// ErrNotFound is wrapped by errors about a manifest or blob the store does not hold.
var ErrNotFound = errors.New("artifact not found")

// IsNotFound reports whether err wraps ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

const (
	blobsDir   = "blobs"
	tmpDir     = "tmp"
	stagingDir = "staging"
	// copyBuffer is the size of each copy's buffer: reads and writes are streamed through
	// it, so memory does not grow with an output's size.
	copyBuffer = 1 << 20
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, copyBuffer); return &b }}

// Store is a content-addressed store in one directory. Its methods are safe for
// concurrent use; one Store per directory (the engine holds its data dir's lock).
type Store struct {
	dir string

	mu sync.Mutex
	// pins counts, per blob name, the intakes that hold it.
	pins map[string]int
	// writing holds the names of tmp/ files an intake is still writing.
	writing map[string]bool
	bytes   int64
	blobs   int
	// staged counts, per manifest blob name, the holders of its staging directory.
	staged map[string]*stagedTree
}

type stagedTree struct {
	holders int
	ready   chan struct{}
	err     error
}

// Open opens the store in dir, creating it if needed. It removes what a crash left in
// tmp/ and staging/ (no intake or stage runs before Open returns) and counts the blobs.
func Open(dir string) (*Store, error) {
	s := &Store{dir: dir, pins: map[string]int{}, writing: map[string]bool{}, staged: map[string]*stagedTree{}}
	for _, d := range []string{tmpDir, stagingDir} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return nil, fmt.Errorf("opening artifact store: %w", err)
		}
	}
	for _, d := range []string{blobsDir, tmpDir, stagingDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("opening artifact store: %w", err)
		}
	}
	err := s.walkBlobs(func(_ string, size int64) error {
		s.bytes += size
		s.blobs++
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("opening artifact store: %w", err)
	}
	return s, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Usage returns the bytes and the number of blobs stored (manifests included).
func (s *Store) Usage() (bytes int64, blobs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.blobs
}

func (s *Store) blobPath(name string) string {
	return filepath.Join(s.dir, blobsDir, name[:2], name)
}

// walkBlobs calls fn with every blob's name and size.
func (s *Store) walkBlobs(fn func(name string, size int64) error) error {
	root := filepath.Join(s.dir, blobsDir)
	fans, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, fan := range fans {
		if !fan.IsDir() {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(root, fan.Name()))
		if err != nil {
			return err
		}
		for _, e := range entries {
			info, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if err := fn(e.Name(), info.Size()); err != nil {
				return err
			}
		}
	}
	return nil
}

// pin holds a blob against Collect; it is taken before the blob's existence is checked,
// so a collection cannot remove a blob an intake decided to reuse.
func (s *Store) pin(name string) {
	s.mu.Lock()
	s.pins[name]++
	s.mu.Unlock()
}

func (s *Store) unpin(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		if s.pins[n]--; s.pins[n] <= 0 {
			delete(s.pins, n)
		}
	}
}

// newTemp creates a file in tmp/ that Collect leaves alone until forget. The name is
// registered before the file exists, so a collection never sees it unregistered.
func (s *Store) newTemp() (*os.File, error) {
	var r [12]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, err
	}
	name := "blob-" + hex.EncodeToString(r[:])
	s.mu.Lock()
	s.writing[name] = true
	s.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(s.dir, tmpDir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		s.forget(name)
		return nil, err
	}
	return f, nil
}

func (s *Store) forget(tmp string) {
	s.mu.Lock()
	delete(s.writing, filepath.Base(tmp))
	s.mu.Unlock()
}

// syncfs makes everything written to the store's file system durable: one call for a
// whole intake instead of one fsync per file.
func (s *Store) syncfs() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := syncFS(d); err != nil {
		return fmt.Errorf("syncing artifact store: %w", err)
	}
	return nil
}

// place renames a durable tmp file to its blob's name, unless the blob is there already
// (then the tmp file goes). It reports whether it added the blob. The caller has pinned
// name.
func (s *Store) place(tmp, name string, size int64) (bool, error) {
	defer s.forget(tmp)
	final := s.blobPath(name)
	if _, err := os.Stat(final); err == nil {
		os.Remove(tmp)
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		os.Remove(tmp)
		return false, err
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return false, err
	}
	s.mu.Lock()
	s.bytes += size
	s.blobs++
	s.mu.Unlock()
	return true, nil
}

// has reports whether the blob is stored.
func (s *Store) has(name string) bool {
	_, err := os.Stat(s.blobPath(name))
	return err == nil
}

// openBlob opens a blob by digest; ErrNotFound when it is not stored.
func (s *Store) openBlob(digest string) (*os.File, error) {
	name, err := blobName(digest)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(s.blobPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", digest, ErrNotFound)
	}
	return f, err
}

// Manifest returns the manifest stored under digest, checked against it; ErrNotFound
// when the store does not hold it.
func (s *Store) Manifest(digest string) (Manifest, error) {
	f, err := s.openBlob(digest)
	if err != nil {
		return Manifest{}, fmt.Errorf("reading manifest: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return Manifest{}, fmt.Errorf("reading manifest %s: %w", digest, err)
	}
	if got := digestOf(b); got != digest {
		return Manifest{}, fmt.Errorf("reading manifest %s: content has digest %s", digest, got)
	}
	m, err := decodeManifest(b)
	if err != nil {
		return Manifest{}, fmt.Errorf("reading manifest %s: %w", digest, err)
	}
	return m, nil
}

// Verify reads the manifest under digest and every blob it names, and fails naming the
// first file whose blob is missing or whose content does not have its digest.
func (s *Store) Verify(ctx context.Context, digest string) error {
	m, err := s.Manifest(digest)
	if err != nil {
		return err
	}
	bufp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bufp)
	for _, file := range m.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.verifyBlob(file, *bufp); err != nil {
			return fmt.Errorf("verifying %s: file %q: %w", digest, file.Path, err)
		}
	}
	return nil
}

func (s *Store) verifyBlob(file File, buf []byte) error {
	f, err := s.openBlob(file.Digest)
	if err != nil {
		return err
	}
	defer f.Close()
	h := newHasher()
	n, err := io.CopyBuffer(h, f, buf)
	if err != nil {
		return err
	}
	if got := h.digest(); got != file.Digest || n != file.Size {
		return fmt.Errorf("blob holds %d bytes of digest %s, want %d bytes of %s", n, got, file.Size, file.Digest)
	}
	return nil
}

// Collect removes every blob that no manifest in referenced reaches and no intake pins,
// and what interrupted intakes left in tmp/. A referenced manifest that cannot be read
// stops the collection before anything is removed (what it reaches is unknown).
func (s *Store) Collect(referenced []string) (removedBlobs int, removedBytes int64, err error) {
	keep := map[string]bool{}
	for _, d := range referenced {
		m, err := s.Manifest(d)
		if err != nil {
			return 0, 0, fmt.Errorf("collecting artifacts: %w", err)
		}
		name, _ := blobName(d)
		keep[name] = true
		for _, f := range m.Files {
			name, _ := blobName(f.Digest)
			keep[name] = true
		}
	}
	err = s.walkBlobs(func(name string, size int64) error {
		if keep[name] {
			return nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.pins[name] > 0 {
			return nil
		}
		err := os.Remove(s.blobPath(name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		removedBlobs++
		removedBytes += size
		s.bytes -= size
		s.blobs--
		return nil
	})
	if err != nil {
		return removedBlobs, removedBytes, fmt.Errorf("collecting artifacts: %w", err)
	}
	return removedBlobs, removedBytes, s.removeStaleTemps()
}

func (s *Store) removeStaleTemps() error {
	entries, err := os.ReadDir(filepath.Join(s.dir, tmpDir))
	if err != nil {
		return fmt.Errorf("collecting artifacts: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		if !s.writing[e.Name()] {
			os.RemoveAll(filepath.Join(s.dir, tmpDir, e.Name()))
		}
	}
	return nil
}
