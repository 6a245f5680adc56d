//go:build !linux && !darwin

package provider

import (
	"errors"
	"runtime"
)

// parentCommandLine cannot read the parent's command line here (Windows has no call for
// another process's arguments short of reading its memory): a destroy keeps every
// plan-time check, and `terraform destroy -refresh=false` skips the plan they come from.
func parentCommandLine() ([]string, error) {
	return nil, errors.New("reading the parent process's command line is not supported on " + runtime.GOOS)
}
