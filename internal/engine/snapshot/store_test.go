package snapshot

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func packed(t *testing.T, files map[string]string) ([]byte, Manifest) {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	var buf bytes.Buffer
	m, err := Pack(dir, &buf, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), m
}

func TestStore_PutIsIdempotent(t *testing.T) {
	archive, m := packed(t, map[string]string{"train.py": "print(1)", "pkg/a.py": "a"})
	s := NewStore(filepath.Join(t.TempDir(), "snapshots"))

	id, err := s.Put(bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if id != m.SHA256 {
		t.Errorf("Put ID = %s, want the manifest's SHA256 %s", id, m.SHA256)
	}
	dir, err := s.Path(id)
	if err != nil {
		t.Fatalf("Path: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "pkg/a.py")); string(got) != "a" {
		t.Errorf("pkg/a.py = %q, want a", got)
	}

	// A marker left in the stored snapshot survives a second Put: nothing is unpacked again.
	marker := filepath.Join(dir, "marker")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := s.Put(bytes.NewReader(archive))
	if err != nil || again != id {
		t.Fatalf("second Put = %s, %v; want %s", again, err, id)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("second Put replaced the stored snapshot: %v", err)
	}

	other, _ := packed(t, map[string]string{"train.py": "print(2)"})
	otherID, err := s.Put(bytes.NewReader(other))
	if err != nil || otherID == id {
		t.Errorf("Put of a different archive = %s, %v; want a new ID", otherID, err)
	}
	assertScratchEmpty(t, s)
}

func TestStore_ConcurrentPutsOfOneArchive(t *testing.T) {
	archive, m := packed(t, map[string]string{"a.py": "a", "b/c.py": "c"})
	s := NewStore(t.TempDir())
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			id, err := s.Put(bytes.NewReader(archive))
			if err == nil && id != m.SHA256 {
				err = fmt.Errorf("id %s, want %s", id, m.SHA256)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("Put: %v", err)
		}
	}
	if _, err := s.Path(m.SHA256); err != nil {
		t.Errorf("Path: %v", err)
	}
	assertScratchEmpty(t, s)
}

func TestStore_PathAndDeleteOfUnknownSnapshots(t *testing.T) {
	s := NewStore(t.TempDir())
	unknown := strings.Repeat("ab", 32)
	for _, id := range []string{unknown, "", "../etc", strings.Repeat("AB", 32), tmpDir} {
		if _, err := s.Path(id); !IsNotFound(err) {
			t.Errorf("Path(%q) error = %v, want ErrNotFound", id, err)
		}
		if err := s.Delete(id); !IsNotFound(err) {
			t.Errorf("Delete(%q) error = %v, want ErrNotFound", id, err)
		}
	}
}

func TestStore_Delete(t *testing.T) {
	archive, _ := packed(t, map[string]string{"a.py": "a", "sub/b.py": "b"})
	s := NewStore(t.TempDir())
	id, err := s.Put(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Path(id); !IsNotFound(err) {
		t.Errorf("Path after Delete error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(id); !IsNotFound(err) {
		t.Errorf("second Delete error = %v, want ErrNotFound", err)
	}
	// A deleted snapshot can be stored again.
	if again, err := s.Put(bytes.NewReader(archive)); err != nil || again != id {
		t.Errorf("Put after Delete = %s, %v; want %s", again, err, id)
	}
	assertScratchEmpty(t, s)
}

func TestStore_PutRejectsBadArchivesAndStoresNothing(t *testing.T) {
	s := NewStore(t.TempDir())
	if _, err := s.Put(bytes.NewReader(craft(t, file("ok"), file("../evil")))); !IsInvalidArchive(err) {
		t.Errorf("Put of a traversing archive error = %v, want ErrInvalidArchive", err)
	}
	s.limits = Limits{MaxBytes: 100, MaxFiles: 1}
	if _, err := s.Put(bytes.NewReader(craft(t, file("a"), file("b")))); !IsLimitError(err) {
		t.Errorf("Put over the file limit error = %v, want a *LimitError", err)
	}
	huge := bytes.Repeat([]byte{0}, int(uploadLimit(s.limits))+1)
	if _, err := s.Put(bytes.NewReader(huge)); !IsLimitError(err) {
		t.Errorf("Put of an oversized upload error = %v, want a *LimitError", err)
	}
	entries, _ := os.ReadDir(s.root)
	if len(entries) != 1 || entries[0].Name() != tmpDir {
		t.Errorf("store holds %v after failed Puts, want only %s", entries, tmpDir)
	}
	assertScratchEmpty(t, s)
}

func TestStore_PutOfSymlinkArchive(t *testing.T) {
	s := NewStore(t.TempDir())
	id, err := s.Put(bytes.NewReader(craft(t, file("lib/a.py"), link("a.py", "lib/a.py"),
		&tar.Header{Typeflag: tar.TypeDir, Name: "ro/", Mode: 0o555})))
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := s.Path(id)
	if got, err := os.ReadFile(filepath.Join(dir, "a.py")); err != nil || string(got) != "lib/a.py" {
		t.Errorf("a.py through its symlink = %q, %v", got, err)
	}
	// Directories keep owner write access, so a snapshot can always be deleted.
	if err := s.Delete(id); err != nil {
		t.Errorf("Delete: %v", err)
	}
}

func assertScratchEmpty(t *testing.T, s *Store) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.root, tmpDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("scratch directory holds %v", entries)
	}
}
