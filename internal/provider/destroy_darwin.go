package provider

import (
	"os"

	"golang.org/x/sys/unix"
)

// parentCommandLine returns the command line of this process's parent, from the kernel's
// kern.procargs2 (macOS has no /proc).
func parentCommandLine() ([]string, error) {
	raw, err := unix.SysctlRaw("kern.procargs2", os.Getppid())
	if err != nil {
		return nil, err
	}
	return parseProcArgs2(raw)
}
