//go:build unix && !linux

package artifacts

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes written data where there is no syncfs(2) (macOS): sync(2) covers every
// file system, d's included.
func syncFS(*os.File) error {
	unix.Sync()
	return nil
}
