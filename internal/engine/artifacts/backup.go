package artifacts

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"time"
)

// Backups. Blobs never change once named, so a backup of the engine's records (one read
// transaction) is made whole by copying, afterwards, every blob those records reference:
// Hold pins them at the moment of the records' copy, so no collection removes them while
// WriteBlobs streams them, even if their job is deleted meanwhile.

// Hold pins every blob the manifests under digests reach (each manifest and its files'
// blobs) until release, and returns their names, sorted. A manifest the store does not
// hold is an error, and then nothing stays pinned. Call it where no collection can run
// between reading the references and Hold returning.
func (s *Store) Hold(digests []string) (names []string, release func(), err error) {
	seen := map[string]bool{}
	add := func(digest string) error {
		name, err := blobName(digest)
		if err != nil {
			return err
		}
		if !seen[name] {
			seen[name] = true
			s.pin(name)
			names = append(names, name)
		}
		return nil
	}
	release = func() { s.unpin(names) }
	for _, d := range digests {
		if err := add(d); err != nil {
			release()
			return nil, nil, err
		}
		m, err := s.Manifest(d)
		if err != nil {
			release()
			return nil, nil, err
		}
		for _, f := range m.Files {
			if err := add(f.Digest); err != nil {
				release()
				return nil, nil, err
			}
		}
	}
	slices.Sort(names)
	return names, release, nil
}

// WriteBlobs writes the named blobs to tw as dir/blobs/<2 hex>/<name>, the store's own
// layout below dir (so the archive extracted into a data dir restores them): directories
// first (mode 0700), each blob mode 0600, all with modTime. Each blob is hashed as it is
// read: one whose content is not its name fails the backup, naming it.
func (s *Store) WriteBlobs(ctx context.Context, tw *tar.Writer, dir string, names []string, modTime time.Time) error {
	bufp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bufp)
	for _, d := range []string{dir, path.Join(dir, blobsDir)} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o700, ModTime: modTime}); err != nil {
			return err
		}
	}
	written := map[string]bool{}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		fan := path.Join(dir, blobsDir, name[:2])
		if !written[fan] {
			written[fan] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: fan + "/", Mode: 0o700, ModTime: modTime}); err != nil {
				return err
			}
		}
		if err := s.writeBlob(tw, path.Join(fan, name), name, modTime, *bufp); err != nil {
			return fmt.Errorf("backing up blob %s: %w", name, err)
		}
	}
	return nil
}

func (s *Store) writeBlob(tw *tar.Writer, tarName, name string, modTime time.Time, buf []byte) error {
	f, err := s.openBlob(digestPrefix + name)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: tarName, Mode: 0o600, Size: info.Size(), ModTime: modTime}); err != nil {
		return err
	}
	h := newHasher()
	n, err := io.CopyBuffer(io.MultiWriter(tw, h), io.LimitReader(f, info.Size()), buf)
	if err != nil {
		return err
	}
	if n != info.Size() || h.hex() != name {
		return fmt.Errorf("the blob's content has digest %s (%d bytes read): the store is damaged", h.digest(), n)
	}
	return nil
}
