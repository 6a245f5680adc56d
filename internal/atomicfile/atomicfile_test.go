package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Write and WriteLive replace the whole content with the mode asked, and leave no
// temporary file behind.
func TestWriteReplacesTheWholeFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pin")
	for _, w := range []func(string, []byte, os.FileMode) error{Write, WriteLive} {
		if err := os.WriteFile(path, []byte("an older and longer content\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := w(path, []byte("new\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil || string(raw) != "new\n" {
			t.Fatalf("content %q (%v); want %q", raw, err, "new\n")
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v; want 0600", st.Mode().Perm())
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Fatalf("the directory holds %d entries; want the file alone", len(entries))
		}
	}
}
