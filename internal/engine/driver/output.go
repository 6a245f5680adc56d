package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tarball"
)

// CheckTaskPath accepts a path in a task's working directory as TaskInput.Dest,
// TaskOutput.Path and FetchOutput's rel give it: relative, slash-separated, clean, valid
// UTF-8, not "." and never climbing with "..". Drivers check every such path before use.
func CheckTaskPath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("task path %q: name a path below the task's working directory", p)
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return fmt.Errorf("task path %q: not valid UTF-8", p)
	case path.IsAbs(p):
		return fmt.Errorf("task path %q: must be relative to the task's working directory", p)
	case p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("task path %q: must not leave the task's working directory", p)
	case path.Clean(p) != p:
		return fmt.Errorf("task path %q: not clean (want %q)", p, path.Clean(p))
	}
	return nil
}

// CheckTaskPaths checks every path of spec's Inputs and Outputs with CheckTaskPath.
func CheckTaskPaths(spec TaskSpec) error {
	for _, in := range spec.Inputs {
		if err := CheckTaskPath(in.Dest); err != nil {
			return fmt.Errorf("input %s: %w", in.Src, err)
		}
		if in.Src == "" {
			return fmt.Errorf("input %s: no source directory", in.Dest)
		}
	}
	for _, out := range spec.Outputs {
		if err := CheckTaskPath(out.Path); err != nil {
			return fmt.Errorf("output: %w", err)
		}
	}
	return nil
}

// MakeOutputDirs creates, below the working directory work on this machine, each
// output's directory (a file output's parent).
func MakeOutputDirs(work string, outputs []TaskOutput) error {
	for _, out := range outputs {
		dir := out.Path
		if out.File {
			dir = path.Dir(dir)
		}
		if err := os.MkdirAll(filepath.Join(work, filepath.FromSlash(dir)), 0o755); err != nil {
			return fmt.Errorf("creating output %s: %w", out.Path, err)
		}
	}
	return nil
}

// CopyTree copies the contents of the directory src into dst on this machine (created if
// needed): regular files with their permission bits, directories and symlinks; it fails
// on anything else. Drivers whose nodes share the engine's machine copy inputs with it.
func CopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			return os.MkdirAll(target, 0o755)
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case mode.IsRegular():
			return copyFile(p, target, mode.Perm())
		}
		return fmt.Errorf("copying %s: not a regular file, directory or symlink", p)
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteOutputTar writes the path rel of the working directory work, on this machine, to
// w as FetchOutput's tar stream: a directory's contents (names relative to it) or a file
// under its base name. It fails naming the file at a socket, device or fifo, and with
// ErrNotFound when rel does not exist. Drivers whose nodes share the engine's machine
// (local, fake) use it; remote drivers run the same on the node with find and tar.
func WriteOutputTar(ctx context.Context, w io.Writer, work, rel string) error {
	if err := CheckTaskPath(rel); err != nil {
		return err
	}
	root := filepath.Join(work, filepath.FromSlash(rel))
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		return NotFound(fmt.Errorf("output %s does not exist in the task's working directory", rel))
	}
	return tarball.Write(ctx, w, root, tarball.Options{Shown: rel})
}

// FetchLocalOutput is FetchOutput's stream for a task whose working directory work is on
// this machine (local nodes, the fake): ErrNotFound at once when rel does not exist.
func FetchLocalOutput(ctx context.Context, work, rel string) (io.ReadCloser, error) {
	if err := CheckTaskPath(rel); err != nil {
		return nil, Permanent(err)
	}
	if _, err := os.Lstat(filepath.Join(work, filepath.FromSlash(rel))); errors.Is(err, fs.ErrNotExist) {
		return nil, NotFound(fmt.Errorf("fetching output: %s does not exist in the task's working directory", rel))
	}
	return StreamOutput(ctx, func(ctx context.Context, w io.Writer) error {
		return WriteOutputTar(ctx, w, work, rel)
	}), nil
}

// StreamOutput runs write in a goroutine and returns its output as a reader: what write
// returns is the error of the reader's last Read (nil: io.EOF). Close stops write (its
// ctx ends and its writes fail) and waits for it.
func StreamOutput(ctx context.Context, write func(ctx context.Context, w io.Writer) error) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(write(ctx, pw))
	}()
	return &streamReader{PipeReader: pr, cancel: cancel, done: done}
}

type streamReader struct {
	*io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *streamReader) Close() error {
	r.PipeReader.Close()
	r.cancel()
	<-r.done
	return nil
}
