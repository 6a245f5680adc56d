// Package tarball writes a tree of this machine as a tar stream: the one writer behind a
// task's output stream on drivers whose nodes share the engine's machine (driver), the
// engine's read of a rw_mount output (controllers/jobs), and the copy of a task's code and
// inputs to a remote node (driver/ssh).
package tarball

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// copyBuffer is the buffer of one file's copy into the stream.
const copyBuffer = 256 << 10

// Options say what Write does with what it meets.
type Options struct {
	// SkipSpecial leaves sockets, devices and fifos out of the stream (a copy of files).
	// Otherwise each fails the write, naming the file as an output's.
	SkipSpecial bool
	// Shown is the path errors name the root by (a path in a task's working directory, an
	// output's name); the root's own path when empty.
	Shown string
}

// Write writes root to w as a tar stream: a directory's contents, with names relative to it
// (the directory itself is no entry), or anything else as one entry under its base name.
// Regular files keep their permission bits, directories are named with a trailing "/",
// symlinks are written as symlinks with their targets as they are (the reader judges
// them), and owners are cleared. A socket, device or fifo fails the write naming the file,
// unless opts.SkipSpecial. ctx stops a long write.
func Write(ctx context.Context, w io.Writer, root string, opts Options) error {
	tw := tar.NewWriter(w)
	if err := Append(ctx, tw, root, "", opts); err != nil {
		return err
	}
	return tw.Close()
}

// Append writes root to tw as Write does, with every name under prefix ("" for none), and
// leaves tw open: for a stream that holds more than one tree (a backup).
func Append(ctx context.Context, tw *tar.Writer, root, prefix string, opts Options) error {
	shown := opts.Shown
	if shown == "" {
		shown = root
	}
	info, err := os.Lstat(root)
	if err != nil {
		return err
	}
	buf := make([]byte, copyBuffer)
	if !info.IsDir() {
		return writeEntry(tw, root, path.Join(prefix, filepath.Base(root)), info, shown, opts, buf)
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name, err := filepath.Rel(root, p)
		if err != nil || name == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		name = filepath.ToSlash(name)
		return writeEntry(tw, p, path.Join(prefix, name), info, path.Join(filepath.ToSlash(shown), name), opts, buf)
	})
}

// writeEntry writes one file, directory or symlink; shown is the name errors give.
func writeEntry(tw *tar.Writer, p, name string, info fs.FileInfo, shown string, opts Options, buf []byte) error {
	link := ""
	refused := ""
	switch mode := info.Mode(); {
	case mode&fs.ModeSymlink != 0:
		var err error
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	case mode.IsRegular(), mode.IsDir():
	case mode&fs.ModeSocket != 0:
		refused = "is a socket"
	case mode&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		refused = "is a device"
	case mode&fs.ModeNamedPipe != 0:
		refused = "is a fifo"
	default:
		refused = "is not a regular file, directory or symlink"
	}
	if refused != "" {
		if opts.SkipSpecial {
			return nil
		}
		return fmt.Errorf("output file %s %s; an output holds regular files, directories and symlinks", shown, refused)
	}
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return fmt.Errorf("file %s: %w", shown, err)
	}
	hdr.Name = name
	if info.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.CopyBuffer(tw, io.LimitReader(f, info.Size()), buf)
	if err == nil && n != info.Size() {
		err = fmt.Errorf("file %s shrank while it was read", shown)
	}
	return err
}
