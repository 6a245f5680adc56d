package auth

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// TestAuditLogRotates: past its bound the log keeps one previous generation, so the files
// stay under twice the bound, and Entries reads both generations oldest first.
func TestAuditLogRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), AuditFile)
	l, err := OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.maxBytes = 1000

	const n = 60
	for i := range n {
		if err := l.Append(api.AuditEntry{Token: "ci", Action: "POST /v1/x", Target: fmt.Sprintf("job-%03d", i), Result: "allowed"}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := os.Stat(path + ".1")
	if err != nil {
		t.Fatalf("no previous generation after %d entries: %v", n, err)
	}
	for _, fi := range []os.FileInfo{cur, prev} {
		if fi.Size() > l.maxBytes {
			t.Errorf("%s is %d bytes; the bound is %d", fi.Name(), fi.Size(), l.maxBytes)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v; want 0600", fi.Name(), fi.Mode().Perm())
		}
	}

	entries, err := l.Entries()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 || len(entries) >= n {
		t.Fatalf("Entries gave %d entries; want the newest ones, fewer than the %d written", len(entries), n)
	}
	// The newest entry is last, and the entries are consecutive: nothing between the two
	// generations is lost or repeated.
	last := n - 1
	for i := len(entries) - 1; i >= 0; i-- {
		want := fmt.Sprintf("job-%03d", last-(len(entries)-1-i))
		if entries[i].Target != want {
			t.Fatalf("entry %d is %q; want %q (entries: %v)", i, entries[i].Target, want, entries)
		}
	}
}

// TestAuditLogReopensItsSize: an engine restarted on a full log rotates on its next entry
// instead of growing the file past the bound.
func TestAuditLogReopensItsSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), AuditFile)
	if err := os.WriteFile(path, make([]byte, 2000), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.maxBytes = 1000
	if err := l.Append(api.AuditEntry{Token: "ci", Action: "DELETE /v1/x", Result: "denied"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + ".1"); err != nil || fi.Size() != 2000 {
		t.Fatalf("the full log was not kept as the previous generation: %v %v", fi, err)
	}
	entries, err := l.Entries()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Action != "DELETE /v1/x" {
		t.Fatalf("Entries = %v; want the one new entry (the old file held no JSON lines)", entries)
	}
}
