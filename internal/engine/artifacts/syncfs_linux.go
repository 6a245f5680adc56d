package artifacts

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes the file system that holds d: one syncfs(2) for a whole intake.
func syncFS(d *os.File) error { return unix.Syncfs(int(d.Fd())) }
