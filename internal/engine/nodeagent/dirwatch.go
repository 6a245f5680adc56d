package nodeagent

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// watchRemoved returns a channel closed when dir is deleted, and a stop function. An
// agent whose node directory is deleted (as when a test run deletes its data dir) stops
// its tasks and exits, so nothing is left running that nobody could find any more.
//
// It watches the parent for IN_DELETE of dir's name, which the kernel reports at rmdir
// time; IN_DELETE_SELF on dir itself would wait until the last reference to the
// directory goes, and the tasks' working directories inside it hold references.
func watchRemoved(dir string) (<-chan struct{}, func(), error) {
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
		return nil, nil, fmt.Errorf("watching node dir: %w", err)
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
