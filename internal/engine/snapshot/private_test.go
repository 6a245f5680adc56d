package snapshot

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The store's directories are private (0700) even when its root existed with 0755, and
// what it stores carries no group or other bits.
func TestStore_PutKeepsSnapshotsPrivate(t *testing.T) {
	root := filepath.Join(t.TempDir(), "snapshots")
	if err := os.MkdirAll(filepath.Join(root, tmpDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root, filepath.Join(root, tmpDir)} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	archive, _ := packed(t, map[string]string{"train.py": "print(1)", "pkg/a.py": "a"})
	s := NewStore(root)
	id, err := s.Put(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{
		root: 0o700, filepath.Join(root, tmpDir): 0o700, filepath.Join(root, id): 0o700,
		filepath.Join(root, id, "pkg"): 0o700, filepath.Join(root, id, "train.py"): 0o600,
	} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o; want %04o", name, got, want)
		}
	}
}

// A full disk while unpacking is the engine's fault, not the archive's: the error says
// so and is not ErrInvalidArchive (the API turns that one into 400), whether the disk runs
// out of bytes while a file is written or of inodes while one is created. The store sits
// on a small tmpfs, which these tests (run as root, as the SSH tests are) can mount.
func TestStore_PutOnAFullDiskIsNotAnInvalidArchive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test must run as root: it mounts a small tmpfs to fill")
	}
	random := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return string(b)
	}
	bigFiles := map[string]string{"a.bin": random(100 << 10), "b.bin": random(100 << 10)}
	manyFiles := map[string]string{}
	for i := range 40 {
		manyFiles[fmt.Sprintf("pkg/m%02d.py", i)] = "x = 1\n"
	}
	for name, tt := range map[string]struct {
		mountOpts string
		files     map[string]string
	}{
		"out of bytes":  {"size=320k", bigFiles},
		"out of inodes": {"size=4m,nr_inodes=24", manyFiles},
	} {
		t.Run(name, func(t *testing.T) {
			mnt := t.TempDir()
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", tt.mountOpts, "tmpfs", mnt).CombinedOutput(); err != nil {
				t.Fatalf("mounting a tmpfs: %v: %s", err, out)
			}
			t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
			archive, _ := packed(t, tt.files)
			_, err := NewStore(filepath.Join(mnt, "snapshots")).Put(bytes.NewReader(archive))
			if err == nil {
				t.Fatal("Put on a full disk succeeded")
			}
			if IsInvalidArchive(err) || !strings.Contains(err.Error(), "no space left on device") {
				t.Fatalf("Put on a full disk = %v; want a no-space error that is not an invalid archive", err)
			}
		})
	}
}
