//go:build linux && !mlcompute_portable

package proc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// WaitExited blocks until the child pid has exited, without reaping it (waitid with
// WNOWAIT): the zombie keeps its pid and process group id reserved until the caller reaps
// it, so a KillGroup of that group in between reaches no stranger.
func WaitExited(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// Cwd returns the working directory of pid.
func Cwd(pid int) (string, error) {
	return os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
}

// WatchRemoved returns a channel closed when dir is deleted, and a stop function.
//
// It watches the parent for IN_DELETE of dir's name, which the kernel reports at rmdir
// time; IN_DELETE_SELF on dir itself would wait until the last reference to the
// directory goes, and working directories inside it hold references.
func WatchRemoved(dir string) (<-chan struct{}, func(), error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, nil, fmt.Errorf("creating inotify instance: %w", err)
	}
	name := []byte(filepath.Base(dir))
	parentWd, err := unix.InotifyAddWatch(fd, filepath.Dir(dir), unix.IN_DELETE|unix.IN_ONLYDIR)
	if err == nil {
		_, err = unix.InotifyAddWatch(fd, dir, unix.IN_DELETE_SELF|unix.IN_ONLYDIR)
	}
	if err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("watching %s: %w", dir, err)
	}
	// A non-blocking descriptor wrapped by os.NewFile uses the runtime poller: Read
	// sleeps without holding a thread and Close wakes it.
	f := os.NewFile(uintptr(fd), "inotify")
	removed := make(chan struct{})
	go func() {
		buf := make([]byte, 64*1024)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			// struct inotify_event: wd, mask, cookie, len (4 bytes each), then the
			// NUL-padded name.
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				wd := int32(binary.NativeEndian.Uint32(buf[off:]))
				mask := binary.NativeEndian.Uint32(buf[off+4:])
				nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
				start := off + unix.SizeofInotifyEvent
				evName := bytes.TrimRight(buf[start:min(start+nameLen, n)], "\x00")
				if mask&unix.IN_DELETE_SELF != 0 || (int(wd) == parentWd && mask&unix.IN_DELETE != 0 && bytes.Equal(evName, name)) {
					close(removed)
					return
				}
				off = start + nameLen
			}
		}
	}()
	return removed, func() { f.Close() }, nil
}

// changeEvents are the changes of a directory that WatchChanges reports: a file written,
// created or renamed into place. The directory's own removal ends the watch.
const changeEvents = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_ONLYDIR

// WatchChanges watches dir with inotify: the kernel wakes the watcher on a write, so a
// change is seen as it happens, with no read on an interval. The channel receives after
// each change (coalesced) and is closed once dir is removed or ctx ends. An error wrapping
// fs.ErrNotExist if dir does not exist.
func WatchChanges(ctx context.Context, dir string) (<-chan struct{}, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("creating inotify instance: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, changeEvents); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.ENOENT) {
			err = fs.ErrNotExist
		}
		return nil, fmt.Errorf("watching %s: %w", dir, err)
	}
	// Closing the descriptor (when ctx ends) wakes the reader in the runtime's poller.
	f := os.NewFile(uintptr(fd), "inotify")
	stop := context.AfterFunc(ctx, func() { f.Close() })
	changed := make(chan struct{}, 1)
	go func() {
		defer close(changed)
		defer stop()
		defer f.Close()
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			gone := false
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				// struct inotify_event: wd, mask, cookie, len (4 bytes each), then the name.
				mask := binary.NativeEndian.Uint32(buf[off+4:])
				if mask&(unix.IN_DELETE_SELF|unix.IN_IGNORED) != 0 {
					gone = true
				}
				off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
			}
			if gone {
				return
			}
			select {
			case changed <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
	}()
	return changed, nil
}

// sunPathMax is the longest socket path bind(2) and connect(2) take (108 bytes with NUL).
const sunPathMax = 107

// WithSocketPath calls f with a path naming sock that fits in a sockaddr_un: sock itself
// when short enough, else /proc/self/fd/<n>/<base> through an O_PATH descriptor of sock's
// directory, which stays open while f runs. Data dirs of any length thus work.
func WithSocketPath(sock string, f func(path string) error) error {
	if len(sock) <= sunPathMax {
		return f(sock)
	}
	fd, err := unix.Open(filepath.Dir(sock), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening socket dir: %w", err)
	}
	defer unix.Close(fd)
	short := "/proc/self/fd/" + strconv.Itoa(fd) + "/" + filepath.Base(sock)
	if len(short) > sunPathMax {
		return fmt.Errorf("socket name %s is too long", filepath.Base(sock))
	}
	return f(short)
}
