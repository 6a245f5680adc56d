package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// mlcompute backup FILE writes a private, usable copy of a running engine's store, as a
// tar archive that extracts into a data dir.
func TestBackupCommand(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{})
	if _, err := e.Client(t, "").CreateWorkspace(context.Background(), api.WorkspaceSpec{Name: "kept"}); err != nil {
		t.Fatal(err)
	}
	// A code snapshot (what a job or a schedule runs) with a file and a link inside it.
	code := t.TempDir()
	if err := os.WriteFile(filepath.Join(code, "train.py"), []byte("print('trained')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("train.py", filepath.Join(code, "main.py")); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if _, err := snapshot.Pack(code, &archive, snapshot.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	snap, err := e.Client(t, "").PutSnapshot(context.Background(), "kept", archive.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "backup.tar")
	out, errOut, err := runCLI(e, "backup", dest)
	if err != nil {
		t.Fatalf("backup: %v (%s)", err, errOut)
	}
	if !strings.Contains(out, dest) || !strings.Contains(out, "1 code snapshots") {
		t.Errorf("output %q does not name %s and the one snapshot", out, dest)
	}
	fi, err := os.Stat(dest)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %04o; want 0600", fi.Mode().Perm())
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(dest), ".*partial*"))
	if len(leftovers) != 0 {
		t.Errorf("partial files left: %v", leftovers)
	}
	// The archive is laid out as a data dir: extracted, its state.db opens as a store.
	restored := t.TempDir()
	if out, err := exec.Command("tar", "-xf", dest, "-C", restored).CombinedOutput(); err != nil {
		t.Fatalf("tar -xf: %v: %s", err, out)
	}
	// The snapshot comes back as stored: the file and the link.
	restoredCode := filepath.Join(restored, "snapshots", snap)
	if b, err := os.ReadFile(filepath.Join(restoredCode, "train.py")); err != nil || string(b) != "print('trained')\n" {
		t.Errorf("the snapshot's train.py after a restore: %q, %v", b, err)
	}
	if target, err := os.Readlink(filepath.Join(restoredCode, "main.py")); err != nil || target != "train.py" {
		t.Errorf("the snapshot's link after a restore: %q, %v", target, err)
	}
	st, err := store.Open(filepath.Join(restored, "state.db"), time.Second)
	if err != nil {
		t.Fatalf("opening the backup: %v", err)
	}
	defer st.Close()
	err = st.View(func(tx *store.Tx) error {
		if ok, err := tx.Get(store.Workspaces, "kept", &api.Workspace{}); !ok || err != nil {
			t.Errorf("workspace in the backup: found %v, %v", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCheckBackupRefusesStrayEntries: an archive the engine would not write (a name outside
// the data dir's layout, a snapshot path that climbs out, a device) fails the check, so a
// damaged or foreign file is never renamed into place as a backup.
func TestCheckBackupRefusesStrayEntries(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, tt := range []struct {
		name string
		hdr  tar.Header
	}{
		{"outside the layout", tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd"}},
		{"not a snapshot id", tar.Header{Typeflag: tar.TypeReg, Name: "snapshots/code/train.py"}},
		{"climbs out of a snapshot", tar.Header{Typeflag: tar.TypeReg, Name: "snapshots/" + id + "/../../state.db"}},
		{"a device in a snapshot", tar.Header{Typeflag: tar.TypeChar, Name: "snapshots/" + id + "/null"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "backup.tar")
			f, err := os.Create(file)
			if err != nil {
				t.Fatal(err)
			}
			tw := tar.NewWriter(f)
			hdr := tt.hdr
			hdr.Mode = 0o600
			if err := tw.WriteHeader(&hdr); err != nil {
				t.Fatal(err)
			}
			if err := tw.Close(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if _, err := checkBackup(file); err == nil || !strings.Contains(err.Error(), "unexpected entry") {
				t.Fatalf("checkBackup = %v; want an unexpected entry error", err)
			}
		})
	}
}
