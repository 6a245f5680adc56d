//go:build !linux

package containerrt

import (
	"context"
	"fmt"
	"runtime"
)

// Runtime is never made off Linux: containerd runs Linux containers on Linux nodes only, so
// a task in a container image fails there with Open's error, naming the system.
type Runtime struct{}

// Open fails: container images run on Linux nodes only.
func Open(context.Context, string, string) (*Runtime, error) {
	return nil, fmt.Errorf("%w: tasks in container images run on Linux nodes only, not on %s", ErrNoRuntime, runtime.GOOS)
}

// OpenIn fails as Open does.
func OpenIn(ctx context.Context, address, _, engineID string) (*Runtime, error) {
	return Open(ctx, address, engineID)
}

func (*Runtime) Close() error { return nil }

func (*Runtime) Import(context.Context, string, string) (bool, error) { return false, ErrNoRuntime }

func (*Runtime) Pull(context.Context, string) (bool, error) { return false, ErrNoRuntime }

func (*Runtime) Run(context.Context, RunSpec) (int, error) { return -1, ErrNoRuntime }

func (*Runtime) Sweep(context.Context, func(string) bool) ([]string, error) { return nil, ErrNoRuntime }

func (*Runtime) SweepEnded(context.Context) ([]string, error) { return nil, ErrNoRuntime }

func (*Runtime) Containers(context.Context) ([]string, error) { return nil, ErrNoRuntime }

func (*Runtime) ImportedHashes(context.Context) ([]string, error) { return nil, ErrNoRuntime }

func (*Runtime) RemoveImage(context.Context, string) error { return ErrNoRuntime }
