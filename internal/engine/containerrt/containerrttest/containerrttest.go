//go:build linux

// Package containerrttest starts a private containerd for a test: its own root, state
// directory, socket and configuration (no CRI plugin), stopped when the test ends.
package containerrttest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/namespaces"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
)

// Start starts containerd (from PATH; `make test-deps` installs it) and returns its socket.
func Start(t testing.TB) string {
	t.Helper()
	return StartForGroup(t, -1)
}

// StartForGroup is Start with the socket's group gid, so that the logins of that group may
// use it (as the docker group does for Docker's); -1 leaves it root's alone.
func StartForGroup(t testing.TB, gid int) string {
	t.Helper()
	bin, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatal("these tests need containerd and runc on PATH: run `make test-deps` (Debian packages containerd, runc)")
	}
	dir, err := os.MkdirTemp("", "mlc-ctrd-") // short: the socket's path has a 108-byte limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if gid >= 0 { // the group's logins reach the socket through the directory
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "containerd.sock")
	config := filepath.Join(dir, "config.toml")
	// Without CRI (the engine uses containerd's own API), and so without its
	// restrict_oom_score_adj need on machines lacking CAP_SYS_RESOURCE.
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock)
	if gid >= 0 {
		conf += fmt.Sprintf("  gid = %d\n", gid)
	}
	if err := os.WriteFile(config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", config)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A test leaves no container behind; one that did fails here, and its container,
		// task and shim are removed all the same so that nothing outlives the test.
		for _, id := range removeAll(sock) {
			t.Errorf("container %s outlived the test", id)
		}
		// A deleted task's shim exits on its own, shortly; containerd must outlive it.
		for deadline := time.Now().Add(10 * time.Second); len(Shims(sock)) > 0 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		// A shim that stayed after its task was deleted (containerd 1.6.20 does this at
		// times) is stopped, by its pid, and the rootfs it kept mounted is unmounted.
		for _, line := range Shims(sock) {
			if pid, err := strconv.Atoi(strings.Fields(line)[0]); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if mounts, err := os.ReadFile("/proc/self/mounts"); err == nil {
			for _, line := range strings.Split(string(mounts), "\n") {
				if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
					_ = syscall.Unmount(f[1], syscall.MNT_DETACH)
				}
			}
		}
		// runc makes the namespace's parent cgroup in every v1 hierarchy and leaves it,
		// empty, when the last container goes; rmdir fails while another test's container
		// is in it, and then that test's clean-up removes it.
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + containerrt.Namespace)
		for _, d := range append(dirs, "/sys/fs/cgroup/"+containerrt.Namespace) {
			_ = os.Remove(d)
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; {
		// The socket's file appears at bind, before containerd listens on it.
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return sock
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("containerd did not listen on %s within 20 s:\n%s", sock, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeAll deletes every container of the engines' namespace in the containerd at sock,
// with its task and snapshot, and returns their IDs.
func removeAll(sock string) []string {
	ctx := namespaces.WithNamespace(context.Background(), containerrt.Namespace)
	c, err := containerd.New(sock, containerd.WithTimeout(5*time.Second))
	if err != nil {
		return nil
	}
	defer c.Close()
	cs, _ := c.Containers(ctx)
	var ids []string
	for _, ctr := range cs {
		if task, err := ctr.Task(ctx, nil); err == nil {
			_, _ = task.Delete(ctx, containerd.WithProcessKill)
		}
		_ = ctr.Delete(ctx, containerd.WithSnapshotCleanup)
		ids = append(ids, ctr.ID())
	}
	return ids
}

// Shims lists the containerd shims (pid and command line) serving the containerd at sock.
func Shims(sock string) []string {
	out, _ := exec.Command("ps", "-eo", "pid,args").Output()
	var found []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "containerd-shim") && strings.Contains(line, sock) {
			found = append(found, strings.TrimSpace(line))
		}
	}
	return found
}
