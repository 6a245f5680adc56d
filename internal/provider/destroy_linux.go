package provider

import (
	"os"
	"strconv"
	"strings"
)

// parentCommandLine returns the command line of this process's parent, from /proc.
func parentCommandLine() ([]string, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getppid()) + "/cmdline")
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), nil
}
