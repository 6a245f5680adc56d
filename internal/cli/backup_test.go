package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// mlcompute backup FILE writes a private, usable copy of a running engine's store, as a
// tar archive that extracts into a data dir.
func TestBackupCommand(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{})
	if _, err := e.Client(t, "").CreateWorkspace(context.Background(), api.WorkspaceSpec{Name: "kept"}); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "backup.tar")
	out, errOut, err := runCLI(e, "backup", dest)
	if err != nil {
		t.Fatalf("backup: %v (%s)", err, errOut)
	}
	if !strings.Contains(out, dest) {
		t.Errorf("output %q does not name %s", out, dest)
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
