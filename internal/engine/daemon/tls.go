package daemon

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// TLSOptions say how the engine's TCP listeners (the API and scoring) speak (DESIGN 11).
type TLSOptions struct {
	// On turns TLS on for every TCP listener, loopback included (serve --tls). Off loopback
	// TLS is on unless InsecureHTTP.
	On bool
	// CertFile and KeyFile are the operator's certificate chain and key (PEM). Without
	// them the engine makes a CA and a server certificate once in its data dir.
	CertFile, KeyFile string
	// InsecureHTTP allows plain HTTP off loopback, with a warning at start.
	InsecureHTTP bool
}

// validate checks the flags' combinations.
func (o TLSOptions) validate() error {
	switch {
	case (o.CertFile == "") != (o.KeyFile == ""):
		return errors.New("--tls-cert and --tls-key go together: give both, or neither to let the engine make its own certificate")
	case o.InsecureHTTP && (o.On || o.CertFile != ""):
		return errors.New("--insecure-http turns TLS off: it cannot go with --tls, --tls-cert or --tls-key")
	}
	return nil
}

// wants reports whether a TCP listener on host serves TLS.
func (o TLSOptions) wants(host string) bool {
	if o.InsecureHTTP {
		return false
	}
	return o.On || o.CertFile != "" || !IsLoopbackHost(host)
}

// secureListeners wraps the TCP listeners among lns (nil entries and unix sockets are
// left alone) in TLS where opts.TLS wants it, making the data dir's certificate for their
// hosts when the operator gave none. It logs the CA's fingerprint, and warns about plain
// HTTP off loopback. tlsOn[i] tells whether lns[i] now serves TLS, and cfg is the
// servers' TLS configuration (nil when none does), for a server that runs its own
// handshakes on the plain listener (the scoring event loops).
func secureListeners(opts Options, log hclog.Logger, clk clock.PassiveClock, lns ...net.Listener) (out []net.Listener, cfg *tls.Config, tlsOn []bool, err error) {
	out, tlsOn = slices.Clone(lns), make([]bool, len(lns))
	var hosts []string
	for i, ln := range lns {
		addr, ok := tcpAddr(ln)
		if !ok {
			continue
		}
		if opts.TLS.wants(addr.IP.String()) {
			tlsOn[i] = true
			hosts = append(hosts, certHosts(addr.IP)...)
		} else if !addr.IP.IsLoopback() {
			log.Warn("serving plain HTTP off loopback (--insecure-http): tokens and endpoint keys cross the network in clear", "address", addr.String())
		}
	}
	if len(hosts) == 0 {
		return out, nil, tlsOn, nil
	}
	certFile, keyFile := opts.TLS.CertFile, opts.TLS.KeyFile
	if certFile == "" {
		g, err := tlsconfig.EnsureGenerated(opts.DataDir, dedupe(hosts), clk.Now())
		if err != nil {
			return nil, nil, nil, fmt.Errorf("making the engine's TLS certificate: %w", err)
		}
		certFile, keyFile = g.CertFile, g.KeyFile
		log.Info("serving TLS with the engine's own CA; clients pin it (ca_certificate, MLCOMPUTE_CA_CERT or mlcompute login)",
			"ca_file", g.CAFile, "ca_sha256", g.CAFingerprint)
	}
	if cfg, err = tlsconfig.Server(certFile, keyFile); err != nil {
		return nil, nil, nil, err
	}
	for i, ln := range lns {
		if tlsOn[i] {
			out[i] = tls.NewListener(ln, cfg)
		}
	}
	return out, cfg, tlsOn, nil
}

func tcpAddr(ln net.Listener) (*net.TCPAddr, bool) {
	if ln == nil {
		return nil, false
	}
	a, ok := ln.Addr().(*net.TCPAddr)
	return a, ok
}

// certHosts are the names and addresses a certificate for a listener on ip must hold:
// ip itself, or for an unspecified address every address of this machine and its host
// name; and always the loopback names, for clients on this machine.
func certHosts(ip net.IP) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if !ip.IsUnspecified() {
		return append(hosts, ip.String())
	}
	if name, err := os.Hostname(); err == nil {
		hosts = append(hosts, name)
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			hosts = append(hosts, n.IP.String())
		}
	}
	return hosts
}

func dedupe(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// ScoringOverTLS makes the scoring server serve TLS with cfg on its plain TCP listener:
// each connection's handshake as net/http runs one (under the header timeout, net/http's
// 400 to plain HTTP), then crypto/tls's record layer on the event loops, so a request
// over TLS costs no more goroutine wake-ups than one over plain HTTP (tools/bench/README.md).
// Requests carry Request.TLS, so the router sends X-Forwarded-Proto: https. A failed
// handshake is logged to logger at debug (a client's address and crypto/tls's error, no
// secret). The scoring benchmark (tools/bench) serves the router with it too.
func ScoringOverTLS(s *router.LoopServer, cfg *tls.Config, logger hclog.Logger) {
	s.TLSConfig = cfg
	s.Fallback.HandshakeFailed = func(remoteAddr string, err error) {
		logger.Debug("scoring: TLS handshake failed", "remote", remoteAddr, "error", err)
	}
}
