//go:build unix

package envprep

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
)

// A user-managed environment's PrepareAndRun checks the interpreter and then runs the
// command with its directory first on PATH; a missing interpreter fails before the command.
func TestPrepareAndRunUserManaged(t *testing.T) {
	dir := t.TempDir()
	interp := filepath.Join(dir, "mypython")
	if err := os.WriteFile(interp, []byte("#!/bin/sh\necho fake python\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(path string) (string, error) {
		env := Env{Definition: environment.Normalise(nil, &api.UserManagedEnvironment{InterpreterPath: path}, nil)}
		vars := map[string]string{}
		cmd := env.PrepareAndRun([]string{"sh", "-c", "command -v mypython; echo served"}, vars)
		c := exec.Command(cmd[0], cmd[1:]...)
		c.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
		out, err := c.CombinedOutput()
		return string(out), err
	}
	out, err := run(interp)
	if err != nil || !strings.Contains(out, interp+"\nserved\n") {
		t.Fatalf("with the interpreter: %v\n%s", err, out)
	}
	out, err = run(filepath.Join(dir, "missing"))
	if err == nil || strings.Contains(out, "served") || !strings.Contains(out, "is not an executable file on this node") {
		t.Fatalf("without the interpreter: %v\n%s", err, out)
	}
}

// Remove never touches a build whose lock a builder holds, and removes the link and every
// build directory of the name once the lock is free; other names stay.
func TestRemoveRespectsTheBuildersLock(t *testing.T) {
	cache := t.TempDir()
	for _, d := range []string{"builds/aaaaaaaaaaaaaaaa-1/bin", "builds/aaaaaaaaaaaaaaaa-2", "builds/bbbbbbbbbbbbbbbb-3"} {
		if err := os.MkdirAll(filepath.Join(cache, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("builds/aaaaaaaaaaaaaaaa-1", filepath.Join(cache, "aaaaaaaaaaaaaaaa")); err != nil {
		t.Fatal(err)
	}
	names, err := Cached(cache)
	if err != nil {
		t.Fatal(err)
	}
	if got := environment.Garbage(names, nil); strings.Join(got, ",") != "aaaaaaaaaaaaaaaa,bbbbbbbbbbbbbbbb" {
		t.Fatalf("cached names %v give garbage %v", names, got)
	}
	builder, err := os.OpenFile(filepath.Join(cache, "aaaaaaaaaaaaaaaa.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer builder.Close()
	if err := syscall.Flock(int(builder.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	yes := func() bool { return true }
	if removed, err := Remove(cache, "aaaaaaaaaaaaaaaa", yes); removed || err != nil {
		t.Fatalf("Remove while a builder holds the lock: %v, %v", removed, err)
	}
	if _, err := os.Stat(filepath.Join(cache, "aaaaaaaaaaaaaaaa", "bin")); err != nil {
		t.Fatalf("the locked build was touched: %v", err)
	}
	if err := syscall.Flock(int(builder.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if removed, err := Remove(cache, "aaaaaaaaaaaaaaaa", func() bool { return false }); removed || err != nil {
		t.Fatalf("Remove of a build in use again: %v, %v", removed, err)
	}
	if removed, err := Remove(cache, "aaaaaaaaaaaaaaaa", yes); !removed || err != nil {
		t.Fatalf("Remove with the lock free: %v, %v", removed, err)
	}
	left, _ := filepath.Glob(filepath.Join(cache, "builds", "*"))
	if _, err := os.Lstat(filepath.Join(cache, "aaaaaaaaaaaaaaaa")); !os.IsNotExist(err) || len(left) != 1 || filepath.Base(left[0]) != "bbbbbbbbbbbbbbbb-3" {
		t.Fatalf("after Remove: link %v, builds %v; want no link and only bbbbbbbbbbbbbbbb-3", err, left)
	}
}
