//go:build unix

package main

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// The TLS pass of -mode router serves the router and nginx with one certificate, made for
// the run by the engine's own code (tlsconfig.EnsureGenerated, what `mlcompute serve` does
// when it is given no certificate): an ECDSA P-256 key signed by a CA of its own, for the
// loopback names. The router serves it with tlsconfig.Server's tls.Config, as the engine
// does; nginx is given the same chain and key and the same floor of TLS 1.2.

// benchTLS is the pass's certificate.
type benchTLS struct {
	tlsconfig.Generated
	// Describe names the certificate and protocols for the pass's heading.
	Describe string
}

// makeBenchCert makes a CA and a server certificate for the loopback names in dir.
func makeBenchCert(dir string) (*benchTLS, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	g, err := tlsconfig.EnsureGenerated(dir, []string{"localhost", "127.0.0.1", "::1"}, time.Now())
	if err != nil {
		return nil, fmt.Errorf("making the benchmark's certificate: %w", err)
	}
	return &benchTLS{Generated: g, Describe: "TLS 1.2 or later, the engine's ECDSA P-256 certificate for both"}, nil
}

// client is the HTTP client that checks every target answers: it pins the run's CA, as
// the engine's clients do, so a proxy serving another certificate fails the run. Without
// TLS (nil t) it is a plain client.
func (t *benchTLS) client() (*http.Client, error) {
	tr := &http.Transport{Proxy: nil}
	if t != nil {
		ca, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, err
		}
		if tr.TLSClientConfig, err = tlsconfig.Client(ca); err != nil {
			return nil, err
		}
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: tr}, nil
}
