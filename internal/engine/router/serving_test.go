package router_test

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/routertest"
)

// The router's conformance table (package routertest) against each way it is served.

// TestCasesOnTheEventLoops serves the router as the engine does: the event loops answer
// the usual request and hand anything else to the lean server, which hands what it does
// not serve to net/http.
func TestCasesOnTheEventLoops(t *testing.T) {
	var onLoops atomic.Int64 // requests the loops answered themselves
	routertest.Run(t, func(t testing.TB, ln net.Listener, p routertest.Parts) func() {
		srv := &router.LoopServer{Router: p.Router, Fallback: &leanserver.Server{Handler: p.Handler},
			Observe: func(endpoint, deployment string, status int, elapsed time.Duration) {
				onLoops.Add(1)
				p.Observe(endpoint, deployment, status, elapsed)
			}, Loops: 2}
		go func() { _ = srv.Serve(ln) }()
		return func() { _ = srv.Close() }
	})
	// Else the table ran on the lean server alone, the loops handing everything off.
	if onLoops.Load() == 0 {
		t.Fatal("the event loops answered none of the table's requests themselves")
	}
}

// TestCasesOnTheLeanServer serves the router on the lean HTTP/1.1 server alone.
func TestCasesOnTheLeanServer(t *testing.T) {
	routertest.Run(t, func(t testing.TB, ln net.Listener, p routertest.Parts) func() {
		srv := &leanserver.Server{Handler: p.Handler}
		go func() { _ = srv.Serve(ln) }()
		return func() { _ = srv.Close() }
	})
}

// TestCasesOnNetHTTP serves the router on net/http, as a caller embedding it would.
func TestCasesOnNetHTTP(t *testing.T) {
	routertest.Run(t, func(t testing.TB, ln net.Listener, p routertest.Parts) func() {
		srv := &http.Server{Handler: p.Handler}
		go func() { _ = srv.Serve(ln) }()
		return func() { _ = srv.Close() }
	})
}

// TestCasesOnTheEventLoopsOverTLS serves the router as the engine does with TLS: the
// event loops run crypto/tls's record layer themselves, after each connection's
// handshake, and hand what they do not serve to the lean server, TLS and all.
func TestCasesOnTheEventLoopsOverTLS(t *testing.T) {
	var onLoops atomic.Int64
	routertest.RunTLS(t, func(t testing.TB, ln net.Listener, p routertest.Parts) func() {
		srv := &router.LoopServer{Router: p.Router, Fallback: &leanserver.Server{Handler: p.Handler},
			Observe: func(endpoint, deployment string, status int, elapsed time.Duration) {
				onLoops.Add(1)
				p.Observe(endpoint, deployment, status, elapsed)
			}, Loops: 2, TLSConfig: p.TLS}
		go func() { _ = srv.Serve(ln) }()
		return func() { _ = srv.Close() }
	})
	if onLoops.Load() == 0 {
		t.Fatal("the event loops answered none of the table's requests themselves")
	}
}

// TestCasesOnTheLeanServerOverTLS serves the router on the lean server over a TLS
// listener.
func TestCasesOnTheLeanServerOverTLS(t *testing.T) {
	routertest.RunTLS(t, func(t testing.TB, ln net.Listener, p routertest.Parts) func() {
		srv := &leanserver.Server{Handler: p.Handler}
		go func() { _ = srv.Serve(tls.NewListener(ln, p.TLS)) }()
		return func() { _ = srv.Close() }
	})
}

// TestCasesOnNetHTTPOverTLS is the table over TLS on net/http, the reference the lean
// server's TLS follows.
func TestCasesOnNetHTTPOverTLS(t *testing.T) {
	routertest.RunTLS(t, func(t testing.TB, ln net.Listener, p routertest.Parts) func() {
		srv := &http.Server{Handler: p.Handler}
		go func() { _ = srv.Serve(tls.NewListener(ln, p.TLS)) }()
		return func() { _ = srv.Close() }
	})
}
