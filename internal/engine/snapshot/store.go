package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotFound is wrapped by Store errors about a snapshot that is not stored.
var ErrNotFound = errors.New("snapshot not found")

// IsNotFound reports whether err wraps ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// tmpDir is the Store's scratch directory under its root. IDs are hex, so it cannot clash
// with one. What an interrupted Put leaves there is safe to delete while no Put runs.
const tmpDir = ".tmp"

// Store keeps unpacked snapshots in a directory, one subdirectory per snapshot named by
// its ID: the hex SHA-256 of the archive it was unpacked from. A snapshot appears only
// once fully unpacked and leaves at once when deleted, so a directory that Path returns
// is always complete. Methods are safe for concurrent use.
type Store struct {
	root   string
	limits Limits
}

// NewStore returns a Store under root, which is created on first use. Archives are held
// to DefaultLimits.
func NewStore(root string) *Store {
	return &Store{root: root, limits: DefaultLimits}
}

// Put stores the archive read from r and returns its ID. The archive is first spooled to
// disk while hashing it: when a snapshot with that ID is already stored, Put returns the
// ID without unpacking again; otherwise it unpacks into a scratch directory and renames
// that into place. Put returns a *LimitError for an archive over the limits and an error
// wrapping ErrInvalidArchive for an unsafe or malformed one, and stores nothing then.
func (s *Store) Put(r io.Reader) (id string, err error) {
	tmp := filepath.Join(s.root, tmpDir)
	if err := s.makeDirs(); err != nil {
		return "", fmt.Errorf("creating snapshot store: %w", err)
	}
	spool, err := os.CreateTemp(tmp, "upload-*.tar.gz")
	if err != nil {
		return "", fmt.Errorf("spooling snapshot: %w", err)
	}
	defer func() {
		spool.Close()
		os.Remove(spool.Name())
	}()

	h := sha256.New()
	src := r
	maxUpload := uploadLimit(s.limits)
	if maxUpload > 0 {
		src = io.LimitReader(r, maxUpload+1)
	}
	n, err := io.Copy(io.MultiWriter(spool, h), src)
	if err != nil {
		return "", fmt.Errorf("spooling snapshot: %w", err)
	}
	if maxUpload > 0 && n > maxUpload {
		return "", &LimitError{Kind: LimitUploadBytes, Count: n, Limit: maxUpload}
	}
	id = hex.EncodeToString(h.Sum(nil))
	final := filepath.Join(s.root, id)
	if isDir(final) {
		return id, nil
	}

	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("spooling snapshot: %w", err)
	}
	work, err := os.MkdirTemp(tmp, "unpack-*")
	if err != nil {
		return "", fmt.Errorf("creating scratch directory: %w", err)
	}
	if err := Unpack(spool, work, s.limits); err != nil {
		os.RemoveAll(work)
		return "", fmt.Errorf("unpacking snapshot %s: %w", id, err)
	}
	if err := os.Rename(work, final); err != nil {
		os.RemoveAll(work)
		// Another Put of the same archive got there first.
		if isDir(final) {
			return id, nil
		}
		return "", fmt.Errorf("storing snapshot %s: %w", id, err)
	}
	return id, nil
}

// Path returns the directory holding the snapshot id. It returns an error wrapping
// ErrNotFound when no such snapshot is stored, including when id is not a snapshot ID.
func (s *Store) Path(id string) (string, error) {
	if !validID(id) {
		return "", fmt.Errorf("snapshot %q: %w", id, ErrNotFound)
	}
	p := filepath.Join(s.root, id)
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
		return "", fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("looking up snapshot %s: %w", id, err)
	}
	return p, nil
}

// IDs lists the stored snapshots, in lexical order. A snapshot being uploaded or deleted is
// in the scratch directory, not here.
func (s *Store) IDs() ([]string, error) {
	entries, err := os.ReadDir(s.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && validID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Delete removes the snapshot id. It returns an error wrapping ErrNotFound when the
// snapshot is already gone. The snapshot is first renamed out of sight, so Path never
// returns a half-deleted directory.
func (s *Store) Delete(id string) error {
	if !validID(id) {
		return fmt.Errorf("snapshot %q: %w", id, ErrNotFound)
	}
	tmp := filepath.Join(s.root, tmpDir)
	if err := s.makeDirs(); err != nil {
		return fmt.Errorf("deleting snapshot %s: %w", id, err)
	}
	trash, err := os.MkdirTemp(tmp, "delete-*")
	if err != nil {
		return fmt.Errorf("deleting snapshot %s: %w", id, err)
	}
	defer os.RemoveAll(trash)
	gone := filepath.Join(trash, id)
	if err := os.Rename(filepath.Join(s.root, id), gone); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
		}
		return fmt.Errorf("deleting snapshot %s: %w", id, err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("deleting snapshot %s: %w", id, err)
	}
	return nil
}

// makeDirs creates the store's root and scratch directory, private to the engine's user
// (0700) even when they existed with another mode.
func (s *Store) makeDirs() error {
	for _, dir := range []string{s.root, filepath.Join(s.root, tmpDir)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// uploadLimit bounds the size of an archive that can unpack within l: the content, plus
// gzip's worst case on incompressible data, plus a tar header and padding for every file
// and directory, plus the trailer Unpack accepts. Zero means no bound.
func uploadLimit(l Limits) int64 {
	if l.MaxBytes <= 0 || l.MaxFiles <= 0 {
		return 0
	}
	const perEntry = 4 << 10 // a header, a PAX record for a long name, padding
	return l.MaxBytes + l.MaxBytes/100 + int64(2*l.MaxFiles)*perEntry + 2*maxTrailer
}

// validID reports whether id has the form of a snapshot ID: 64 lowercase hex digits.
func validID(id string) bool {
	if len(id) != sha256.Size*2 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
