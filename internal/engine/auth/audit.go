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

// AuditLog appends entries, one JSON object a line, to a file only the engine's user may
// read. An entry holds names, routes and paths, never a secret: no token, key or body.
type AuditLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

// OpenAudit opens (or makes) the audit log at path for appending.
func OpenAudit(path string) (*AuditLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("securing the audit log: %w", err)
	}
	return &AuditLog{path: path, f: f}, nil
}

// Append writes one entry as one line, in one write.
func (l *AuditLog) Append(e api.AuditEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.f.Write(append(line, '\n'))
	return err
}

// Entries reads the log, oldest first. A line that does not parse (a write cut short by a
// crash) is skipped.
func (l *AuditLog) Entries() ([]api.AuditEntry, error) {
	f, err := os.Open(l.path)
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
