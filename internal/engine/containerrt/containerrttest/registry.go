//go:build linux

package containerrttest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartRegistry starts an image registry on loopback (Debian's docker-registry, the
// distribution project's registry; `make test-deps` installs it) with its storage in a
// temporary directory, and returns its host:port, stopped when the test ends. containerd
// reaches a loopback registry over plain HTTP, as Docker does, so no certificate is needed.
func StartRegistry(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Fatal("this test needs docker-registry on PATH: run `make test-deps` (Debian package docker-registry)")
	}
	dir := t.TempDir()
	// A free port, released for the registry to take: nothing else on this machine binds
	// loopback ports at random in between but other tests, and a clash fails loudly below.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	config := filepath.Join(dir, "config.yml")
	conf := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
`, filepath.Join(dir, "storage"), addr)
	if err := os.WriteFile(config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", config)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("the registry did not answer on %s within 20 s (%v):\n%s", addr, err, log)
		}
	}
}
