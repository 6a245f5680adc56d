package local

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
)

var _ driver.OutputWatcher = (*Driver)(nil)

// outputEvents are the changes of a task's directory that can change what a reader of its
// output sees: output.log written or created, and exit_code renamed into place (the task
// ended). The directory's own removal (the node terminated) ends the watch.
const outputEvents = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_ONLYDIR

// WatchOutput watches a task's directory with inotify: the kernel wakes the watcher on
// the task's write, so its output reaches a follower as it is written, with no read on an
// interval. The channel receives after each write (coalesced) and when the task ends, and
// is closed once the task's directory is removed or ctx ends. ErrNotFound if the node or
// the task directory does not exist.
func (d *Driver) WatchOutput(ctx context.Context, nodeKey, taskKey string) (<-chan struct{}, error) {
	nodeDir, err := d.nodeDir(nodeKey)
	if err != nil {
		return nil, fmt.Errorf("watching task output: %w", err)
	}
	dir, err := nodeagent.TaskDir(nodeDir, taskKey)
	if err != nil {
		return nil, fmt.Errorf("watching output of task %s: %w", taskKey, err)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watching output of task %s: creating inotify instance: %w", taskKey, err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, outputEvents); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("watching output of task %s on node %s: %w", taskKey, nodeKey, driver.ErrNotFound)
		}
		return nil, fmt.Errorf("watching output of task %s on node %s: %w", taskKey, nodeKey, err)
	}
	// A non-blocking descriptor wrapped by os.NewFile sleeps in the runtime's poller, and
	// closing it (when ctx ends) wakes the reader.
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
