package leanserver

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// tlsServed runs h on a lean server and on a plain net/http server, each over a TLS
// listener with one certificate made as the engine makes its own.
type tlsServed struct {
	lean, plain string // host:port
	srv         *Server
	client      *tls.Config // pins the certificate's CA
	failed      chan handshakeFailure
	leanLog     lines // the lean server's ErrorLog, when HandshakeFailed is not used
	plainLog    lines // net/http's ErrorLog
}

type handshakeFailure struct {
	remote string
	err    error
}

// lines is a log's output, a line at a time.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	l <- strings.TrimRight(string(p), "\n")
	return len(p), nil
}

// tlsOptions say how serveTLS serves.
type tlsOptions struct {
	readHeaderTimeout time.Duration // 10 s when zero
	// logFailures has the lean server log failed handshakes to its ErrorLog (leanLog)
	// rather than report them to HandshakeFailed (failed).
	logFailures bool
	configure   func(*tls.Config) // changes the servers' tls.Config
	clock       clock.WithDelayedExecution
}

// serveTLS serves h over TLS.
func serveTLS(t *testing.T, h http.Handler, o tlsOptions) *tlsServed {
	t.Helper()
	server, client := certificate(t)
	if o.configure != nil {
		o.configure(server)
	}
	readHeaderTimeout := o.readHeaderTimeout
	if readHeaderTimeout == 0 {
		readHeaderTimeout = 10 * time.Second
	}
	ts := &tlsServed{client: client, failed: make(chan handshakeFailure, 16), leanLog: make(lines, 16), plainLog: make(lines, 16)}
	ts.srv = &Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ErrorLog: log.New(ts.leanLog, "", 0), Clock: o.clock}
	if !o.logFailures {
		ts.srv.HandshakeFailed = func(remote string, err error) { ts.failed <- handshakeFailure{remote, err} }
	}
	ln := tls.NewListener(listen(t), server)
	done := make(chan error, 1)
	go func() { done <- ts.srv.Serve(ln) }()
	plainLn := tls.NewListener(listen(t), server)
	plain := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ErrorLog: log.New(ts.plainLog, "", 0)}
	go func() { _ = plain.Serve(plainLn) }()
	t.Cleanup(func() {
		_ = ts.srv.Close()
		_ = plain.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	ts.lean, ts.plain = ln.Addr().String(), plainLn.Addr().String()
	return ts
}

// certificate makes a CA and a server certificate for 127.0.0.1 with the engine's code,
// and returns the server's tls.Config and a client's that pins the CA.
func certificate(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	server, client, err := tlsconfig.Pair(t.TempDir(), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}

// dialTLS is dialRaw over TLS with client's config.
func dialTLS(t *testing.T, addr string, client *tls.Config) *rawConn {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 20 * time.Second}, "tcp", addr, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// tlsEcho answers with what the handler saw of the request's TLS.
var tlsEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.TLS == nil {
		fmt.Fprintf(w, "%s tls=none", r.URL.Path)
		return
	}
	fmt.Fprintf(w, "%s tls version=%#x cipher=%#x complete=%v server=%q proto=%q peer=%d",
		r.URL.Path, r.TLS.Version, r.TLS.CipherSuite, r.TLS.HandshakeComplete, r.TLS.ServerName,
		r.TLS.NegotiatedProtocol, len(r.TLS.PeerCertificates))
})

// A TLS connection's requests see its TLS state, as on net/http: those the lean server
// serves, and those of the connection after it went to net/http.
func TestTLSRequestsCarryTheConnectionsState(t *testing.T) {
	s := serveTLS(t, tlsEcho, tlsOptions{})
	requests := []string{
		"POST /usual HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
		"POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", // net/http's from here on
		"POST /after HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
	}
	answers := func(addr string) []string {
		c := dialTLS(t, addr, s.client)
		var got []string
		for _, r := range requests {
			c.send(r)
			res, body := c.response("POST")
			got = append(got, res.Status+" "+body)
		}
		return got
	}
	lean, plain := answers(s.lean), answers(s.plain)
	for i := range requests {
		if lean[i] != plain[i] {
			t.Errorf("request %d: the lean server's handler saw\n%s\nnet/http's\n%s", i, lean[i], plain[i])
		}
		if !strings.Contains(lean[i], "tls version=0x304") || !strings.Contains(lean[i], "complete=true") {
			t.Errorf("request %d: handler saw %q, want a completed TLS 1.3 connection", i, lean[i])
		}
	}
	if n := s.srv.handoffs.Load(); n != 1 {
		t.Errorf("%d hand-offs, want 1 (the chunked request)", n)
	}
}

// Plain HTTP to the TLS port gets net/http's answer, to the byte, and is logged as
// net/http logs it.
func TestPlainHTTPToATLSPortGetsNetHTTPsAnswer(t *testing.T) {
	s := serveTLS(t, tlsEcho, tlsOptions{logFailures: true})
	answer := func(addr string) string {
		c := dialRaw(t, addr)
		c.send("GET /score HTTP/1.1\r\nHost: x\r\n\r\n")
		b, err := io.ReadAll(c.br)
		if err != nil && !isReset(err) {
			t.Fatalf("reading the answer: %v", err)
		}
		return string(b)
	}
	lean, plain := answer(s.lean), answer(s.plain)
	if lean != plain || !strings.HasPrefix(lean, "HTTP/1.0 400 Bad Request") {
		t.Errorf("the lean server answered %q, net/http %q; want the same 400", lean, plain)
	}
	// net/http logs the client's address and port; the ports differ.
	withoutPort := func(line string) string {
		before, after, _ := strings.Cut(line, "127.0.0.1:")
		_, after, _ = strings.Cut(after, ":")
		return before + "127.0.0.1:" + after
	}
	leanLine, plainLine := next(t, s.leanLog, "the lean server's log"), next(t, s.plainLog, "net/http's log")
	if withoutPort(leanLine) != withoutPort(plainLine) {
		t.Errorf("the lean server logged %q, net/http %q", leanLine, plainLine)
	}
}

// next is the next value from ch.
func next[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
		var zero T
		return zero
	}
}

// Clients the listener's tls.Config refuses (TLS 1.0 and 1.1, one that does not trust
// the certificate) get no request served, and each failed handshake is reported.
func TestRefusedHandshakesAreReported(t *testing.T) {
	served := make(chan string, 16)
	s := serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served <- r.URL.Path }), tlsOptions{})
	_, otherCA := certificate(t)
	for _, tc := range []struct {
		name   string
		client *tls.Config
		want   string // in the error the client gets
	}{
		{"TLS 1.0", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10, InsecureSkipVerify: true}, "protocol version"}, //nolint:gosec // the test's point
		{"TLS 1.1", &tls.Config{MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11, InsecureSkipVerify: true}, "protocol version"}, //nolint:gosec // the test's point
		{"another CA", otherCA, "not trusted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := tls.Dial("tcp", s.lean, tc.client)
			if err == nil {
				_ = nc.Close()
				t.Fatal("the handshake succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("client got %v, want an error with %q", err, tc.want)
			}
			f := next(t, s.failed, "the failed handshake's report")
			if f.err == nil || !strings.HasPrefix(f.remote, "127.0.0.1:") {
				t.Errorf("reported %q: %v; want the client's address and an error", f.remote, f.err)
			}
		})
	}
	if len(served) > 0 {
		t.Errorf("a refused client's request was served: %s", <-served)
	}
}

// The handshake runs under ReadHeaderTimeout: a client that connects and sends nothing,
// or only part of its hello, is closed and reported.
func TestHandshakeUnderReadHeaderTimeout(t *testing.T) {
	s := serveTLS(t, tlsEcho, tlsOptions{readHeaderTimeout: 100 * time.Millisecond})
	for name, sent := range map[string]string{
		"nothing":         "",
		"part of a hello": "\x16\x03\x01\x02\x00\x01",
	} {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, s.lean)
			if sent != "" {
				c.send(sent)
			}
			if !c.closed() {
				t.Fatal("a connection stalled in its handshake was kept open")
			}
			f := next(t, s.failed, "the failed handshake's report")
			var ne net.Error
			if !errors.As(f.err, &ne) || !ne.Timeout() {
				t.Errorf("reported %v, want a timeout", f.err)
			}
		})
	}
}

// After the handshake the first request's head is bounded by ReadHeaderTimeout too, as on
// net/http: a client that says nothing is closed.
func TestFirstRequestUnderReadHeaderTimeout(t *testing.T) {
	s := serveTLS(t, tlsEcho, tlsOptions{readHeaderTimeout: 100 * time.Millisecond})
	for _, addr := range []string{s.lean, s.plain} {
		c := dialTLS(t, addr, s.client)
		if !c.closed() {
			t.Fatalf("%s: a TLS connection that sent no request was kept open", addr)
		}
	}
	select {
	case f := <-s.failed:
		t.Errorf("a completed handshake was reported failed: %v", f.err)
	default:
	}
}

// A client that negotiates HTTP/2 by ALPN (when the listener's tls.Config offers it) is
// served by net/http, which speaks it, with its TLS state.
func TestHTTP2ByALPNGoesToNetHTTP(t *testing.T) {
	s := serveTLS(t, tlsEcho, tlsOptions{configure: func(c *tls.Config) { c.NextProtos = []string{"h2", "http/1.1"} }})
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: s.client, ForceAttemptHTTP2: true}, Timeout: 20 * time.Second}
	defer hc.CloseIdleConnections()
	for _, path := range []string{"/one", "/two"} {
		res, err := hc.Post("https://"+s.lean+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.ProtoMajor != 2 || !strings.Contains(string(body), `proto="h2"`) {
			t.Fatalf("got %s %q, want HTTP/2 with the TLS state", res.Proto, body)
		}
	}
	if n := s.srv.handoffs.Load(); n != 1 {
		t.Errorf("%d hand-offs, want the one HTTP/2 connection", n)
	}
}

// The watch of a slow request reads the TLS connection from a second goroutine; when the
// handler returns, that read is cut by a deadline, which crypto/tls survives: the
// connection serves its next request.
func TestWatchedTLSConnectionServesItsNextRequest(t *testing.T) {
	clk := watchClock()
	entered, proceed := make(chan struct{}), make(chan struct{})
	s := serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-proceed // the watch is reading the connection
		}
		_, _ = io.WriteString(w, r.URL.Path)
	}), tlsOptions{clock: clk})
	c := dialTLS(t, s.lean, s.client)
	c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	await(t, entered, "the slow handler to run")
	clk.Step(watchDelay)
	await(t, watchReading(s.srv), "the watch to read the connection")
	close(proceed)
	if res, body := c.response("GET"); res.StatusCode != 200 || body != "/slow" {
		t.Fatalf("got %s %q, want 200 /slow", res.Status, body)
	}
	c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	if res, body := c.response("GET"); res.StatusCode != 200 || body != "/next" {
		t.Fatalf("after the watch: got %s %q, want 200 /next", res.Status, body)
	}
}

// watchReading is closed once the watch of one of srv's connections is reading it (it
// stays open if none is within await's failsafe).
func watchReading(srv *Server) <-chan struct{} {
	ch := make(chan struct{})
	reading := func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for c := range srv.conns {
			c.watchMu.Lock()
			w := c.watching
			c.watchMu.Unlock()
			if w {
				return true
			}
		}
		return false
	}
	go func() {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if reading() {
				close(ch)
				return
			}
		}
	}()
	return ch
}
