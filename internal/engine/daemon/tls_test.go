package daemon

import (
	"context"
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

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

func TestTLSOnLoopbackServesAPIAndScoring(t *testing.T) {
	dir := shortDir(t)
	addr := startTCP(t, Options{DataDir: dir, Listen: "tcp://127.0.0.1:0", Token: "tok", TLS: TLSOptions{On: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	info, err := os.Stat(filepath.Join(dir, tlsconfig.CAKeyFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the CA key: %v, mode %v; want 0600", err, info)
	}
	// A loopback engine's CA is found in the data dir, as its token is.
	c, err := Connect(ctx, ConnectOptions{Endpoint: "https://" + addr, Token: "tok", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatalf("status over TLS: %v", err)
	}
	if !strings.HasPrefix(st.ScoringURL, "https://127.0.0.1:") {
		t.Fatalf("scoring URL %q; want https:// on loopback", st.ScoringURL)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, tlsconfig.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := tlsconfig.Client(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: pinned}, Timeout: 10 * time.Second}
	res, err := hc.Post(st.ScoringURL+"/nothing/score", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("scoring over TLS: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("scoring an unknown endpoint over TLS: %d; want 404", res.StatusCode)
	}

	// Plain HTTP to the TLS port gets no answer from the API.
	if _, err := mustClient(t, "http://"+addr, "tok").Status(ctx); err == nil {
		t.Error("plain HTTP to the TLS port succeeded")
	}
	// Nor from scoring: net/http's 400 instead, from the lean server as from the API.
	scoringAddr := strings.TrimPrefix(st.ScoringURL, "https://")
	for _, a := range []string{addr, scoringAddr} {
		res, err := http.Post("http://"+a+"/nothing/score", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatalf("plain HTTP to %s: %v", a, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Client sent an HTTP request to an HTTPS server") {
			t.Errorf("plain HTTP to %s got %d %q; want net/http's 400", a, res.StatusCode, body)
		}
	}
	// TLS 1.0 and 1.1 clients are refused, on both listeners.
	for _, a := range []string{addr, scoringAddr} {
		for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
			conn, err := tls.Dial("tcp", a, &tls.Config{MinVersion: v, MaxVersion: v, InsecureSkipVerify: true}) //nolint:gosec // the test's point
			if err == nil {
				conn.Close()
				t.Errorf("%s: a client limited to TLS version %#x connected", a, v)
			}
		}
	}
}

func TestWrongCAIsRefusedNamingTheFingerprint(t *testing.T) {
	dir := shortDir(t)
	addr := startTCP(t, Options{DataDir: dir, Listen: "tcp://127.0.0.1:0", Token: "tok", TLS: TLSOptions{On: true}})
	other, err := tlsconfig.EnsureGenerated(t.TempDir(), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, _ := os.ReadFile(other.CAFile)
	mine, err := tlsconfig.EnsureGenerated(dir, []string{"127.0.0.1"}, time.Now()) // the engine's, unchanged
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, o := range map[string]ConnectOptions{
		"another engine's CA":        {CACert: otherPEM, DataDir: dir},
		"no CA (the system's roots)": {},
	} {
		o.Endpoint, o.Token = "https://"+addr, "tok"
		c, err := Connect(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Status(ctx)
		if !errors.Is(err, tlsconfig.ErrUntrusted) || !strings.Contains(err.Error(), mine.CAFingerprint) {
			t.Errorf("%s: got %v; want an untrusted-certificate error naming %s", name, err, mine.CAFingerprint)
		}
	}
}

func TestOffLoopbackServesTLSWithoutAsking(t *testing.T) {
	ip := nonLoopbackIP(t)
	dir := shortDir(t)
	addr := startTCP(t, Options{DataDir: dir, Listen: "tcp://" + net.JoinHostPort(ip, "0"), Token: "tok"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caPEM, err := os.ReadFile(filepath.Join(dir, tlsconfig.CAFile))
	if err != nil {
		t.Fatalf("no CA made for a listener off loopback: %v", err)
	}
	c, err := Connect(ctx, ConnectOptions{Endpoint: "https://" + addr, Token: "tok", CACert: caPEM})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("status over TLS off loopback: %v", err)
	}
	if _, err := mustClient(t, "http://"+addr, "tok").Status(ctx); err == nil {
		t.Error("plain HTTP off loopback succeeded without --insecure-http")
	}
}

func TestInsecureHTTPServesPlainOffLoopback(t *testing.T) {
	ip := nonLoopbackIP(t)
	dir := shortDir(t)
	addr := startTCP(t, Options{DataDir: dir, Listen: "tcp://" + net.JoinHostPort(ip, "0"), Token: "tok", TLS: TLSOptions{InsecureHTTP: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := mustClient(t, "http://"+addr, "tok").Status(ctx); err != nil {
		t.Fatalf("plain HTTP with --insecure-http: %v", err)
	}
}

func TestTLSFlagCombinations(t *testing.T) {
	for _, tc := range []struct {
		opts TLSOptions
		want string
	}{
		{TLSOptions{CertFile: "c.pem"}, "--tls-cert and --tls-key go together"},
		{TLSOptions{KeyFile: "k.pem"}, "--tls-cert and --tls-key go together"},
		{TLSOptions{InsecureHTTP: true, On: true}, "--insecure-http turns TLS off"},
		{TLSOptions{On: true}, ""},
		{TLSOptions{CertFile: "c.pem", KeyFile: "k.pem"}, ""},
	} {
		err := tc.opts.validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: got %v, want %q", tc.opts, err, tc.want)
		}
	}
}

// nonLoopbackIP is an address of this machine off loopback, for listeners the TLS rule
// applies to without --tls.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("this machine has no IPv4 address off loopback; the test needs one to listen on")
	return ""
}

// The scoring listener's failed handshakes are logged at debug, with the client's address
// and without what the client sent: plain HTTP carrying an endpoint key, an old protocol.
func TestScoringOverTLSLogsFailedHandshakesAtDebug(t *testing.T) {
	cfg, _, err := tlsconfig.Pair(t.TempDir(), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	logged := make(logLines, 16)
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logged})
	r := router.New(router.Options{})
	defer r.Close()
	srv := &router.LoopServer{Router: r, Fallback: &leanserver.Server{Handler: r}}
	ScoringOverTLS(srv, cfg, logger)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	addr := ln.Addr().String()

	const key = "endpoint-key-that-must-not-be-logged"
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/ep/score", strings.NewReader(`{"secret":"`+key+`"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP got %d, want 400", res.StatusCode)
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11, InsecureSkipVerify: true}) //nolint:gosec // the test's point
	if err == nil {
		conn.Close()
		t.Fatal("a TLS 1.1 client connected")
	}
	// Each failed handshake is reported once its connection is done with, which may be
	// after the client has seen its end.
	var out string
	for i := 0; i < 2; i++ {
		select {
		case line := <-logged:
			out += line
		case <-time.After(20 * time.Second):
			t.Fatalf("gave up waiting for the failed handshakes to be logged; logged:\n%s", out)
		}
	}
	if strings.Count(out, "[DEBUG] scoring: TLS handshake failed") != 2 ||
		!strings.Contains(out, "client sent an HTTP request to an HTTPS server") ||
		!strings.Contains(out, "unsupported versions") || !strings.Contains(out, "remote=127.0.0.1:") {
		t.Errorf("logged:\n%s\nwant two failed handshakes at debug, the plain HTTP one and the TLS 1.1 one, with the client's address", out)
	}
	if strings.Contains(out, key) {
		t.Errorf("the log holds the endpoint key:\n%s", out)
	}
}

// logLines is a log's output, one Write (an hclog line) at a time.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	l <- string(p)
	return len(p), nil
}
