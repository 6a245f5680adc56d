// Package containerrttest starts a private containerd for a test: its own root, state
// directory, socket and configuration (no CRI plugin), stopped when the test ends.
package containerrttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Start starts containerd (from PATH; `make test-deps` installs it) and returns its socket.
func Start(t testing.TB) string {
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
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		// The state dir holds the shims' mounts of their rootfs; runc leaves none once
		// every container is deleted, which the tests check themselves.
	})
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := os.Stat(sock); err == nil {
			return sock
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("containerd did not open %s within 20 s:\n%s", sock, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
