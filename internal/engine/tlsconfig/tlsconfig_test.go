package tlsconfig

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// serve runs an HTTPS server with cfg on a loopback port and returns its address.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func generated(t *testing.T) (Generated, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	g, err := EnsureGenerated(dir, []string{"127.0.0.1", "localhost"}, now)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Server(g.CertFile, g.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return g, cfg
}

func get(t *testing.T, addr string, client *tls.Config) error {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: client}, Timeout: 10 * time.Second}
	resp, err := c.Get("https://" + addr + "/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "ok" {
		t.Fatalf("body %q", body)
	}
	return nil
}

func TestGeneratedFilesArePrivateAndTheCAIsKept(t *testing.T) {
	dir := t.TempDir()
	g1, err := EnsureGenerated(dir, []string{"127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CAFile, CAKeyFile, ServerFile, ServerKeyFile} {
		info, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, info.Mode().Perm())
		}
	}
	before, _ := os.ReadFile(g1.CertFile)
	// Same hosts: nothing changes. A new host: a new server certificate, the same CA.
	g2, err := EnsureGenerated(dir, []string{"127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	same, _ := os.ReadFile(g2.CertFile)
	if string(same) != string(before) {
		t.Error("the server certificate was made again for the same hosts")
	}
	g3, err := EnsureGenerated(dir, []string{"127.0.0.1", "engine.example"}, now)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(g3.CertFile)
	if string(after) == string(before) {
		t.Error("the server certificate was kept though it does not name engine.example")
	}
	if g3.CAFingerprint != g1.CAFingerprint {
		t.Errorf("the CA changed: %s then %s", g1.CAFingerprint, g3.CAFingerprint)
	}
}

func TestClientPinningTheCAConnects(t *testing.T) {
	g, srv := generated(t)
	addr := serve(t, srv)
	caPEM, err := os.ReadFile(g.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	client, err := Client(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(t, addr, client); err != nil {
		t.Fatalf("a client pinning the engine's CA: %v", err)
	}
}

func TestWrongOrMissingCANamesTheFingerprintSeen(t *testing.T) {
	g, srv := generated(t)
	addr := serve(t, srv)
	other, _ := generated(t) // another engine's CA
	otherPEM, _ := os.ReadFile(other.CAFile)
	wrong, err := Client(otherPEM)
	if err != nil {
		t.Fatal(err)
	}
	system, err := Client(nil) // the system roots
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*tls.Config{"wrong CA": wrong, "system roots": system} {
		err := get(t, addr, cfg)
		if !errors.Is(err, ErrUntrusted) {
			t.Errorf("%s: got %v, want ErrUntrusted", name, err)
			continue
		}
		if !strings.Contains(err.Error(), g.CAFingerprint) {
			t.Errorf("%s: the error does not name the fingerprint %s: %v", name, g.CAFingerprint, err)
		}
	}
}

func TestOldProtocolsAreRefused(t *testing.T) {
	_, srv := generated(t)
	addr := serve(t, srv)
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{MinVersion: v, MaxVersion: v, InsecureSkipVerify: true}) //nolint:gosec // the test's point
		if err == nil {
			conn.Close()
			t.Errorf("a TLS client limited to version %#x connected", v)
		}
	}
}

func TestPlainHTTPToATLSPortFails(t *testing.T) {
	_, srv := generated(t)
	addr := serve(t, srv)
	resp, err := http.Get("http://" + addr + "/")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Go's TLS server answers a plain request with 400 and a hint, never the handler.
		if resp.StatusCode != http.StatusBadRequest || string(body) == "ok" {
			t.Errorf("plain HTTP to a TLS port answered %d %q", resp.StatusCode, body)
		}
	}
}

func TestNormalizeFingerprint(t *testing.T) {
	g, _ := generated(t)
	bare := strings.ToLower(strings.ReplaceAll(g.CAFingerprint, ":", ""))
	for _, in := range []string{g.CAFingerprint, bare, "SHA256:" + bare} {
		got, err := NormalizeFingerprint(in)
		if err != nil || got != g.CAFingerprint {
			t.Errorf("NormalizeFingerprint(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := NormalizeFingerprint("abc"); err == nil {
		t.Error("a short fingerprint was accepted")
	}
}
