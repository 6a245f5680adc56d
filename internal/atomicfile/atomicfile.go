// Package atomicfile replaces a file's content in one step: readers, and the next start
// after a crash, see the old content or the new, never a torn one.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write writes data to a temporary file next to path, syncs it and renames it over path,
// so the new content also survives a power loss.
func Write(path string, data []byte, perm os.FileMode) error {
	return replace(path, data, perm, true)
}

// WriteLive is Write without the sync, for a file that describes live processes: after a
// power loss the processes are gone too, and what the file then holds does not matter.
// This keeps an fsync off a hot path (a node's start).
func WriteLive(path string, data []byte, perm os.FileMode) error {
	return replace(path, data, perm, false)
}

// replace writes data next to path and renames it over path, syncing first when durable.
func replace(path string, data []byte, perm os.FileMode, durable bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating temp file for %s: %w", path, err)
	}
	name := tmp.Name()
	defer os.Remove(name) // no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("setting mode of %s: %w", path, err)
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return fmt.Errorf("syncing %s: %w", path, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("renaming into %s: %w", path, err)
	}
	return nil
}
