package router

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"

	"github.com/hashicorp/go-hclog"
)

// BenchmarkRouterAllocs measures the router alone, served as the engine serves it (on
// leanserver): the client and the instance are raw HTTP/1.1 over loopback keep-alive
// connections that allocate nothing per request, so allocs/op and B/op are the router's
// (its HTTP server included), which is what the allocation budget counts. Timing is
// comparable with BenchmarkRawDirect.
func BenchmarkRouterAllocs(b *testing.B) {
	backend := rawBackend(b)
	r := New(Options{Logger: hclog.NewNullLogger()})
	b.Cleanup(r.Close)
	u, _ := url.Parse("http://" + backend)
	r.SetEndpoint(Endpoint{
		Name:     "bench",
		AuthMode: AuthModeKey,
		Keys:     [2]string{testPrimary, testSecondary},
		Traffic:  map[string]int{"blue": 100},
		Deployments: map[string]*Deployment{"blue": {
			Name: "blue", Backends: []Backend{{ID: "b-0", URL: u, Ready: true}}, MaxConcurrentPerInstance: 1 << 20,
		}},
	})
	front := newFront(b, r)
	rawLoad(b, front.Listener.Addr().String(), "/bench/score", "Authorization: Bearer "+testPrimary+"\r\n")
}

// BenchmarkRawDirect is BenchmarkRouterAllocs's load sent straight to the instance.
func BenchmarkRawDirect(b *testing.B) {
	rawLoad(b, rawBackend(b), "/score", "")
}

// BenchmarkRouterAllocsTLS is BenchmarkRouterAllocs over TLS, the router served as the
// engine serves it with TLS (the event loops with their TLSConfig, daemon.ScoringOverTLS).
// The client's TLS allocations count too: compare with BenchmarkServerFloor's TLS runs.
func BenchmarkRouterAllocsTLS(b *testing.B) {
	backend := rawBackend(b)
	r := New(Options{Logger: hclog.NewNullLogger()})
	b.Cleanup(r.Close)
	u, _ := url.Parse("http://" + backend)
	r.SetEndpoint(Endpoint{
		Name:     "bench",
		AuthMode: AuthModeKey,
		Keys:     [2]string{testPrimary, testSecondary},
		Traffic:  map[string]int{"blue": 100},
		Deployments: map[string]*Deployment{"blue": {
			Name: "blue", Backends: []Backend{{ID: "b-0", URL: u, Ready: true}}, MaxConcurrentPerInstance: 1 << 20,
		}},
	})
	addr, dial := serveTLS(b, func(ln net.Listener, cfg *tls.Config) func() error {
		srv := &LoopServer{Router: r, Fallback: &leanserver.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}, TLSConfig: cfg}
		go func() { _ = srv.Serve(ln) }()
		return srv.Close
	})
	rawLoadOn(b, dial, addr, "/bench/score", "Authorization: Bearer "+testPrimary+"\r\n")
}

// tlsListenerServer serves a TLS listener, as the lean server and net/http do.
type tlsListenerServer interface {
	Serve(net.Listener) error
	Close() error
}

// onTLSListener is a serveTLS start for srv, which serves a TLS listener.
func onTLSListener(srv tlsListenerServer) func(net.Listener, *tls.Config) func() error {
	return func(ln net.Listener, cfg *tls.Config) func() error {
		go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
		return srv.Close
	}
}

// serveTLS starts a server on a loopback listener with a TLS configuration whose
// certificate is made as the engine makes its own, and returns its address and a dialer
// that pins the certificate's CA. start serves the plain listener with the configuration
// and returns what closes the server.
func serveTLS(b *testing.B, start func(ln net.Listener, cfg *tls.Config) (closeServer func() error)) (string, func() (net.Conn, error)) {
	server, client, err := tlsconfig.Pair(b.TempDir(), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	closeServer := start(ln, server)
	b.Cleanup(func() { _ = closeServer() })
	addr := ln.Addr().String()
	return addr, func() (net.Conn, error) { return tls.Dial("tcp", addr, client) }
}

// rawLoad posts benchPayload over one keep-alive connection per parallel worker and
// fails on any status but 200.
func rawLoad(b *testing.B, addr, path, extraHeader string) {
	rawLoadOn(b, func() (net.Conn, error) { return net.Dial("tcp", addr) }, addr, path, extraHeader)
}

// rawLoadOn is rawLoad over the connections dial makes.
func rawLoadOn(b *testing.B, dial func() (net.Conn, error), addr, path, extraHeader string) {
	req := []byte("POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" + extraHeader +
		"Content-Length: " + strconv.Itoa(len(benchPayload)) + "\r\n\r\n" + benchPayload)
	b.SetParallelism(4)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := dial()
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		br := bufio.NewReaderSize(c, 16<<10)
		for pb.Next() {
			if _, err := c.Write(req); err != nil {
				b.Error(err)
				return
			}
			ok, err := rawMessage(br, nil)
			if err != nil || !ok {
				b.Errorf("response not 200 OK: %v", err)
				return
			}
		}
	})
}

// rawBackend serves every request with a fixed 200 JSON answer, reusing its buffers.
func rawBackend(b *testing.B) string {
	const answer = `{"predictions":[0.1,0.9]}`
	return fixedBackend(b, []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(answer))+"\r\n\r\n"+answer), false)
}

// fixedBackend answers every request (with a Content-Length body, or none) with the same
// bytes, reusing its buffers, and closes each connection after its first answer when
// closeAfter is set. It returns its address.
func fixedBackend(tb testing.TB, res []byte, closeAfter bool) string {
	return testbackend.ServeConns(tb, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReaderSize(c, 16<<10)
		body := make([]byte, 64<<10)
		for {
			if _, err := rawMessage(br, body); err != nil {
				return
			}
			if _, err := c.Write(res); err != nil || closeAfter {
				return
			}
		}
	})
}

// rawMessage reads one HTTP/1.1 message with a Content-Length body (into scratch, or
// discarded) and reports whether it is a response 200.
func rawMessage(br *bufio.Reader, scratch []byte) (bool, error) {
	first, err := br.ReadSlice('\n')
	if err != nil {
		return false, err
	}
	ok := bytes.HasPrefix(first, []byte("HTTP/1.1 200 "))
	length := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return false, err
		}
		if len(line) <= 2 {
			break
		}
		const cl = "content-length:"
		if len(line) > len(cl) && bytes.EqualFold(line[:len(cl)], []byte(cl)) {
			v := bytes.TrimSpace(line[len(cl):])
			for _, d := range v {
				length = length*10 + int(d-'0')
			}
		}
	}
	if scratch != nil && length <= len(scratch) {
		_, err = io.ReadFull(br, scratch[:length])
	} else {
		_, err = br.Discard(length)
	}
	return ok, err
}

// BenchmarkServerFloor is BenchmarkRouterAllocs's load against a server whose handler
// only answers, on net/http and on leanserver: the allocations and time the server alone
// costs, which the router's budget includes.
func BenchmarkServerFloor(b *testing.B) {
	answer := []byte(`{"predictions":[0.1,0.9]}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = []string{"application/json"}
		_, _ = w.Write(answer)
	})
	b.Run("server=net-http", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: h}
		go func() { _ = srv.Serve(ln) }()
		b.Cleanup(func() { _ = srv.Close() })
		rawLoad(b, ln.Addr().String(), "/bench/score", "")
	})
	b.Run("server=leanserver", func(b *testing.B) {
		rawLoad(b, newFront(b, h).Listener.Addr().String(), "/bench/score", "")
	})
	b.Run("server=net-http/tls", func(b *testing.B) {
		addr, dial := serveTLS(b, onTLSListener(&http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: h}))
		rawLoadOn(b, dial, addr, "/bench/score", "")
	})
	b.Run("server=leanserver/tls", func(b *testing.B) {
		addr, dial := serveTLS(b, onTLSListener(&leanserver.Server{ReadHeaderTimeout: 10 * time.Second, Handler: h}))
		rawLoadOn(b, dial, addr, "/bench/score", "")
	})
}
