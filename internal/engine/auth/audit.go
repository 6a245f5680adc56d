package auth

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// AuditFile is the audit log's name in the data dir.
const AuditFile = "audit.log"

// AuditRotateBytes is the size at which the audit log rotates: the current file becomes
// AuditFile + ".1" (replacing the one before), so the log on disk stays under twice this
// however long the engine runs, and reading it stays bounded.
const AuditRotateBytes = 16 << 20

// AuditLog appends entries, one JSON object a line, to a file only the engine's user may
// read. An entry holds names, routes and paths, never a secret: no token, key or body.
type AuditLog struct {
	mu       sync.Mutex
	path     string
	f        *os.File
	size     int64
	maxBytes int64
}

// OpenAudit opens (or makes) the audit log at path for appending.
func OpenAudit(path string) (*AuditLog, error) {
	l := &AuditLog{path: path, maxBytes: AuditRotateBytes}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *AuditLog) open() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the audit log: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("securing the audit log: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("opening the audit log: %w", err)
	}
	l.f, l.size = f, info.Size()
	return nil
}

// rotatedPath is where the previous generation of the log is kept.
func (l *AuditLog) rotatedPath() string { return l.path + ".1" }

// Append writes one entry as one line, in one write, rotating the file first when the line
// would take it past its bound.
func (l *AuditLog) Append(e api.AuditEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size > 0 && l.size+int64(len(line)) > l.maxBytes {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	return err
}

// rotate replaces the previous generation with the current file and starts an empty one.
// On a crash between the rename and the open, the next OpenAudit makes the new file.
func (l *AuditLog) rotate() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("rotating the audit log: %w", err)
	}
	if err := os.Rename(l.path, l.rotatedPath()); err != nil {
		return fmt.Errorf("rotating the audit log: %w", err)
	}
	return l.open()
}

// Entries reads the log, oldest first: the previous generation, then the current file. A
// line that does not parse (a write cut short by a crash) is skipped.
func (l *AuditLog) Entries() ([]api.AuditEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	older, err := readAudit(l.rotatedPath())
	if err != nil {
		return nil, err
	}
	newer, err := readAudit(l.path)
	if err != nil {
		return nil, err
	}
	return append(older, newer...), nil
}

func readAudit(path string) ([]api.AuditEntry, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	var out []api.AuditEntry
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var e api.AuditEntry
			if json.Unmarshal(line, &e) == nil {
				out = append(out, e)
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the audit log: %w", err)
		}
	}
}

// Close closes the file.
func (l *AuditLog) Close() error { return l.f.Close() }
