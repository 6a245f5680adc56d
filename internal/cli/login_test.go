package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// tlsEngine serves HTTPS on loopback with a CA made in a temporary dir, as serve does.
func tlsEngine(t *testing.T) (endpoint, fingerprint string) {
	t.Helper()
	g, err := tlsconfig.EnsureGenerated(t.TempDir(), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tlsconfig.Server(g.CertFile, g.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String(), g.CAFingerprint
}

func TestLoginStoresTheCAOnceConfirmed(t *testing.T) {
	endpoint, fp := tlsEngine(t)
	g := &globals{dataDir: t.TempDir()}
	stored := daemon.KnownCAFile(g.dataDir, endpoint)

	var out bytes.Buffer
	if err := runLogin(context.Background(), g, endpoint, "", strings.NewReader("n\n"), &out); err == nil {
		t.Fatal("login stored a CA the user did not confirm")
	}
	if !strings.Contains(out.String(), fp) {
		t.Errorf("login did not show the fingerprint %s: %q", fp, out.String())
	}
	if _, err := os.Stat(stored); err == nil {
		t.Fatal("a CA was stored without confirmation")
	}

	if err := runLogin(context.Background(), g, endpoint, "", strings.NewReader("y\n"), &out); err != nil {
		t.Fatalf("login confirmed: %v", err)
	}
	info, err := os.Stat(stored)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("stored CA: %v %v; want a 0600 file", err, info)
	}
	// Commands now trust the engine through the stored CA.
	g.endpoint = endpoint
	opts, err := g.tlsOption()
	if err != nil || len(opts) != 1 {
		t.Fatalf("tlsOption: %v %v", opts, err)
	}
	caPEM := daemon.EndpointCA(endpoint, nil, g.dataDir)
	certs, err := tlsconfig.ParseCertificates(caPEM)
	if err != nil || tlsconfig.Fingerprint(certs[0]) != fp {
		t.Fatalf("the CA found for the endpoint is not the one confirmed: %v", err)
	}
}

func TestLoginWithFingerprint(t *testing.T) {
	endpoint, fp := tlsEngine(t)
	g := &globals{dataDir: t.TempDir()}
	var out bytes.Buffer
	wrong := strings.Repeat("AB:", 31) + "AB"
	err := runLogin(context.Background(), g, endpoint, wrong, strings.NewReader(""), &out)
	if err == nil || !strings.Contains(err.Error(), fp) {
		t.Fatalf("a wrong --ca-fingerprint: got %v; want an error naming %s", err, fp)
	}
	if _, err := os.Stat(daemon.KnownCAFile(g.dataDir, endpoint)); err == nil {
		t.Fatal("a CA was stored though its fingerprint did not match")
	}
	bare := strings.ToLower(strings.ReplaceAll(fp, ":", ""))
	if err := runLogin(context.Background(), g, endpoint, bare, strings.NewReader(""), &out); err != nil {
		t.Fatalf("the right --ca-fingerprint: %v", err)
	}
	if _, err := os.Stat(daemon.KnownCAFile(g.dataDir, endpoint)); err != nil {
		t.Fatalf("the CA was not stored: %v", err)
	}
}

func TestLoginRefusesPlainEndpoints(t *testing.T) {
	g := &globals{dataDir: t.TempDir()}
	err := runLogin(context.Background(), g, "http://127.0.0.1:8443", "", strings.NewReader(""), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--endpoint") || !strings.Contains(err.Error(), "https://") {
		t.Fatalf("got %v; want an error naming --endpoint and https://", err)
	}
}
