//go:build unix && !linux

package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// RedirectFD makes descriptor fd (1 for stdout, 2 for stderr) a copy of f.
func RedirectFD(f *os.File, fd int) error { return unix.Dup2(int(f.Fd()), fd) }
