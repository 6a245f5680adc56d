//go:build unix

package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
)

// The engine guide's restore recipe: `mlcompute shutdown`, then at once extract a backup
// into the data dir (tar -xf, which writes state.db). shutdown returns only once the
// engine has exited and released its store, so nothing the old engine commits late lands
// in the restored file, and the engine started next serves the backup's state.
func TestRestoreRightAfterShutdown(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Unix socket paths are limited to 108 bytes, and t.TempDir can be long.
	dir, err := os.MkdirTemp("", "mlc-restore-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // a deleted data dir stops its engine
	ctx := context.Background()
	connect := func() *client.Client {
		t.Helper()
		c, err := daemon.Connect(ctx, daemon.ConnectOptions{DataDir: dir, Command: []string{exe, "serve"}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	workspace := func(c *client.Client, name string) {
		t.Helper()
		if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	cli := func(args ...string) string {
		t.Helper()
		root := NewRootCommand(Config{Use: "mlcompute", Version: "test", Self: func() ([]string, error) { return []string{exe}, nil }})
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(io.Discard)
		root.SetArgs(append([]string{"--data-dir", dir}, args...))
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("mlcompute %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}

	c := connect()
	workspace(c, "before")
	backup := filepath.Join(dir, "backup.tar")
	cli("backup", backup)
	workspace(c, "after")

	if out := cli("shutdown"); !strings.Contains(out, "has stopped") {
		t.Fatalf("shutdown printed %q; want it to say the engine has stopped", out)
	}
	// The store is released: the lock the engine holds while its store is open is free.
	lock, err := os.OpenFile(filepath.Join(dir, daemon.LockFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("the engine still holds its lock (and store) after shutdown returned: %v", err)
	}
	lock.Close()
	if out, err := exec.Command("tar", "-xf", backup, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xf %s: %v: %s", backup, err, out)
	}

	c = connect()
	t.Cleanup(func() { cli("shutdown") })
	wss, err := c.ListWorkspaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ws := range wss {
		names = append(names, ws.Name)
	}
	if strings.Join(names, ",") != "before" {
		t.Fatalf("workspaces after the restore: %v; want the backup's [before]", names)
	}
}
