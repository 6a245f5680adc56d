package artifacts

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteTar writes the output stored under digest to w as a tar stream: its directories,
// then each file in path order, mode 0755 when executable and 0644 otherwise, with no
// owner and a zero time, so the same output always gives the same bytes. Taking that
// stream in again gives the same digest.
func (s *Store) WriteTar(ctx context.Context, w io.Writer, digest string) error {
	m, err := s.Manifest(digest)
	if err != nil {
		return err
	}
	bufp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bufp)
	tw := tar.NewWriter(w)
	made := map[string]bool{}
	for _, file := range m.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, dir := range parents(file.Path) {
			if made[dir] {
				continue
			}
			made[dir] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, Format: tar.FormatPAX}); err != nil {
				return fmt.Errorf("writing output %s: %w", digest, err)
			}
		}
		if err := s.writeTarFile(ctx, tw, file, *bufp); err != nil {
			return fmt.Errorf("writing output %s: file %q: %w", digest, file.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("writing output %s: %w", digest, err)
	}
	return nil
}

func (s *Store) writeTarFile(ctx context.Context, tw *tar.Writer, file File, buf []byte) error {
	f, err := s.openBlob(file.Digest)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: file.Path, Size: file.Size, Mode: fileMode(file), Format: tar.FormatPAX}); err != nil {
		return err
	}
	n, err := io.CopyBuffer(tw, ctxReader{ctx, io.LimitReader(f, file.Size)}, buf)
	if err == nil && n != file.Size {
		err = fmt.Errorf("blob %s is shorter than %d bytes", file.Digest, file.Size)
	}
	return err
}

// parents returns the directories above a slash path, outermost first.
func parents(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

func fileMode(f File) int64 {
	if f.Executable {
		return 0o755
	}
	return 0o644
}

// Export writes the output stored under digest as a tree under dir on the engine's
// machine: a uri_folder's files below dir, a uri_file's one file in dir. dir is created;
// it must not exist or be empty. On error what Export wrote stays: remove dir.
func (s *Store) Export(ctx context.Context, digest, dir string) error {
	m, err := s.Manifest(digest)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("exporting output %s: %w", digest, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("exporting output %s: %w", digest, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("exporting output %s: directory %s is not empty", digest, dir)
	}
	for _, file := range m.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.exportFile(file, dir); err != nil {
			return fmt.Errorf("exporting output %s: file %q: %w", digest, file.Path, err)
		}
	}
	return nil
}

func (s *Store) exportFile(file File, dir string) error {
	src, err := s.openBlob(file.Digest)
	if err != nil {
		return err
	}
	defer src.Close()
	dst := filepath.Join(dir, filepath.FromSlash(file.Path))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fs.FileMode(fileMode(file)))
	if err != nil {
		return err
	}
	// Between two files io.Copy uses copy_file_range: no buffer in the engine.
	n, err := io.Copy(out, io.LimitReader(src, file.Size))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != file.Size {
		err = fmt.Errorf("blob %s is shorter than %d bytes", file.Digest, file.Size)
	}
	return err
}

// Stage exports the output stored under digest to a directory of the store
// (staging/<hex>) for a task's input, TaskSpec.Inputs' Src, and returns it with a
// release function. Callers staging the same digest at once share one export. The
// directory is read-only to its users by agreement: the drivers copy it to the node
// while StartTask runs, so call release once StartTask returned. The last release
// removes the directory; Open removes what a crash left.
func (s *Store) Stage(ctx context.Context, digest string) (dir string, release func(), err error) {
	name, err := blobName(digest)
	if err != nil {
		return "", nil, err
	}
	dir = filepath.Join(s.dir, stagingDir, name)
	s.mu.Lock()
	t, ok := s.staged[name]
	if !ok {
		t = &stagedTree{ready: make(chan struct{})}
		s.staged[name] = t
	}
	t.holders++
	s.mu.Unlock()
	if !ok {
		t.err = s.Export(ctx, digest, dir)
		close(t.ready)
	}
	released := false
	release = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if released {
			return
		}
		released = true
		if t.holders--; t.holders == 0 {
			delete(s.staged, name)
			os.RemoveAll(dir)
		}
	}
	select {
	case <-t.ready:
	case <-ctx.Done():
		release()
		return "", nil, ctx.Err()
	}
	if t.err != nil {
		release()
		return "", nil, fmt.Errorf("staging input: %w", t.err)
	}
	return dir, release, nil
}
