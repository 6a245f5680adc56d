package envprep

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// Cached lists the cache names that have something in the cache: a published build
// (<cache>/<name>) or a build directory (builds/<name>-<pid>, published or left by a killed
// build). Other entries are listed too; the rule ignores names it did not make.
func Cached(cache string) ([]string, error) {
	var out []string
	top, err := os.ReadDir(cache)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range top {
		out = append(out, e.Name())
	}
	builds, err := os.ReadDir(filepath.Join(cache, "builds"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range builds {
		if i := strings.LastIndexByte(e.Name(), '-'); i > 0 {
			out = append(out, e.Name()[:i])
		}
	}
	return out, nil
}

// Remove removes the build of one cache name (the published link and every builds/<name>-*
// directory) under the builders' lock, so a build in progress is never broken: when a
// builder holds the lock, nothing is removed and Remove reports false. stillGarbage is
// asked again once the lock is held, so a job that started to use the build meanwhile
// keeps it. The lock file stays: a builder may have it open already, and a second lock file
// of the same name would let two builders in at once.
func Remove(cache, name string, stillGarbage func() bool) (bool, error) {
	lock, err := os.OpenFile(filepath.Join(cache, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return false, fmt.Errorf("opening the lock of environment build %s: %w", name, err)
	}
	defer lock.Close()
	if err := proc.TryLock(lock); err != nil {
		if errors.Is(err, proc.ErrLocked) {
			return false, nil // a build of it is running: it is in use after all
		}
		return false, fmt.Errorf("locking environment build %s: %w", name, err)
	}
	defer func() { _ = proc.Unlock(lock) }()
	if !stillGarbage() {
		return false, nil
	}
	// The link first: from here on a job looking for the build finds none and builds it.
	if err := os.Remove(filepath.Join(cache, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("removing environment %s: %w", name, err)
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "builds", name+"-*"))
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return false, fmt.Errorf("removing environment build %s: %w", d, err)
		}
	}
	return true, nil
}
