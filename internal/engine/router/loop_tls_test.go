package router

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// TLS on the event loops (loop_tls.go) through real TLS connections on loopback. The
// router's whole table runs over it too (serving_test.go).

// tlsLoopRouter is loopRouter over TLS; it returns the client's TLS configuration, which
// pins the front's CA.
func tlsLoopRouter(t *testing.T, bs ...*testbackend.Backend) (*frontServer, *tls.Config) {
	t.Helper()
	server, client, err := tlsconfig.Pair(t.TempDir(), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 4, bs...)))
	return newFrontTLS(t, r, server), client
}

// dialTLSLoops opens a TLS connection to f, closed when the test ends, whose reads give
// up after failsafe.
func dialTLSLoops(t *testing.T, f *frontServer, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", f.Listener.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(failsafe))
	return c
}

func TestLoopServesTheUsualRequestItselfOverTLS(t *testing.T) {
	b := testbackend.New(t, "b0")
	f, cfg := tlsLoopRouter(t, b)
	c := dialTLSLoops(t, f, cfg)
	_, _ = io.WriteString(c, rawScoreRequest(""))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != http.StatusOK || body != "b0" {
		t.Fatalf("status %d body %q, want 200 from b0", res.StatusCode, body)
	}
	f.over.await(t, 1, "the request to be over")
	if served, handedOff := f.loops.served.Load(), f.loops.handedOff.Load(); served != 1 || handedOff != 0 {
		t.Errorf("loops served %d requests and handed off %d connections, want 1 and 0", served, handedOff)
	}
	if reqs := b.Requests(); len(reqs) != 1 || reqs[0].Header.Get("X-Forwarded-Proto") != "https" {
		t.Errorf("backend saw %+v, want one request with X-Forwarded-Proto: https", reqs)
	}
}

// Requests sent together are decrypted together: the loops serve the usual ones in turn,
// and hand the connection to the lean server at the first one they do not serve (a
// chunked upload), with what they decrypted and what they did not; the lean server
// serves it over the same TLS session, its request carrying the connection's TLS state.
func TestLoopHandsOffATLSConnectionWithWhatItRead(t *testing.T) {
	b := testbackend.New(t, "b0")
	f, cfg := tlsLoopRouter(t, b)
	c := dialTLSLoops(t, f, cfg)
	chunked := "POST /ep/score HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testPrimary +
		"\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n"
	_, _ = io.WriteString(c, rawScoreRequest("")+rawScoreRequest("")+chunked)
	br := bufio.NewReader(c)
	for i := range 3 {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if body := readAll(t, res); res.StatusCode != http.StatusOK || body != "b0" {
			t.Fatalf("response %d: status %d body %q, want 200 from b0", i, res.StatusCode, body)
		}
	}
	f.over.await(t, 3, "the requests to be over")
	if served, handedOff := f.loops.served.Load(), f.loops.handedOff.Load(); served != 2 || handedOff != 1 {
		t.Errorf("loops served %d requests and handed off %d connections, want 2 and 1", served, handedOff)
	}
	reqs := b.Requests()
	if len(reqs) != 3 || reqs[2].Body != "abcd" {
		t.Fatalf("backend saw %+v, want three requests, the last with body abcd", reqs)
	}
	for i, r := range reqs {
		if p := r.Header.Get("X-Forwarded-Proto"); p != "https" {
			t.Errorf("request %d: X-Forwarded-Proto %q, want https", i, p)
		}
	}
}

// A request larger than the loops buffer goes to the lean server with part of it still
// encrypted: crypto/tls goes on from where the loop left it, on the socket.
func TestLoopHandsOffALargeTLSRequest(t *testing.T) {
	b := testbackend.New(t, "b0")
	f, cfg := tlsLoopRouter(t, b)
	body := strings.Repeat("0123456789abcdef", 3*maxBufferedBody/16)
	req, _ := http.NewRequest(http.MethodPost, f.URL+ScoringPath("ep"), strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testPrimary)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	defer client.CloseIdleConnections()
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, res); res.StatusCode != http.StatusOK || got != "b0" {
		t.Fatalf("status %d body %q, want 200 from b0", res.StatusCode, got)
	}
	_ = res.Body.Close()
	if reqs := b.Requests(); len(reqs) != 1 || reqs[0].Body != body {
		t.Fatalf("backend saw %d requests (body intact: %v), want the one with its %d bytes", len(reqs), len(reqs) == 1 && reqs[0].Body == body, len(body))
	}
	if f.loops.handedOff.Load() != 1 {
		t.Errorf("handed off %d connections, want 1", f.loops.handedOff.Load())
	}
}

// The loops' handshakes refuse what net/http's do, the same way: plain HTTP gets
// net/http's 400, an old protocol and a client that trusts another CA fail, and each is
// reported.
func TestLoopTLSRefusesWhatNetHTTPRefuses(t *testing.T) {
	b := testbackend.New(t, "b0")
	f, _ := tlsLoopRouter(t, b)
	addr := f.Listener.Addr().String()

	c := dialLoops(t, addr)
	_, _ = io.WriteString(c, rawScoreRequest(""))
	got, _ := io.ReadAll(c)
	if want := "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"; string(got) != want {
		t.Errorf("plain HTTP got %q, want net/http's %q", got, want)
	}
	if err := wait(t, f.handshakesFailed, "the plain HTTP handshake's report"); !errors.Is(err, leanserver.ErrPlainHTTP) {
		t.Errorf("plain HTTP reported as %v, want ErrPlainHTTP", err)
	}

	old := &tls.Config{MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11, InsecureSkipVerify: true} //nolint:gosec // the test's point
	if tc, err := tls.Dial("tcp", addr, old); err == nil {
		_ = tc.Close()
		t.Fatal("a TLS 1.1 client connected")
	}
	if err := wait(t, f.handshakesFailed, "the TLS 1.1 handshake's report"); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("TLS 1.1 reported as %v, want a protocol version error", err)
	}

	_, other, err := tlsconfig.Pair(t.TempDir(), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if tc, err := tls.Dial("tcp", addr, other); err == nil {
		_ = tc.Close()
		t.Fatal("a client that trusts another CA connected")
	}
	if err := wait(t, f.handshakesFailed, "the other CA's handshake's report"); err == nil {
		t.Error("the other CA's handshake was reported without its error")
	}
	if len(b.Requests()) != 0 || f.loops.served.Load() != 0 {
		t.Errorf("a refused client's request was served")
	}
}

// A connection that never finishes its handshake does not hold Close up, even with no
// header timeout to end it: the handshake is cancelled with the server.
func TestLoopCloseEndsHandshakesUnderWay(t *testing.T) {
	server, _, err := tlsconfig.Pair(t.TempDir(), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := newTestRouter(t, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	srv := &LoopServer{Router: r, Loops: 1, TLSConfig: server, Fallback: &leanserver.Server{Handler: r}}
	go func() { _ = srv.Serve(&countingListener{Listener: ln, accepted: &accepted}) }()
	c := dialLoops(t, ln.Addr().String())
	_, _ = c.Write([]byte{0x16, 0x03, 0x01}) // the start of a ClientHello, and no more
	for deadline := time.Now().Add(failsafe); accepted.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection was not accepted")
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	if err := wait(t, closed, "Close with a handshake under way"); err != nil {
		t.Errorf("Close: %v", err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the half-handshaken connection read %d bytes, %v; want it closed", n, err)
	}
}

func TestByteQueue(t *testing.T) {
	var q byteQueue
	q.write([]byte("hello "))
	q.write([]byte("world"))
	if got := string(q.bytes()); got != "hello world" {
		t.Fatalf("bytes %q", got)
	}
	p := make([]byte, 4)
	if n := q.read(p); n != 4 || string(p) != "hell" || q.len() != 7 {
		t.Fatalf("read %d %q, len %d", n, p, q.len())
	}
	q.discard(3)
	// Room after the end: the unread bytes move to the front first.
	room := q.spare(10)
	if len(room) < 10 || q.len() != 4 || string(q.bytes()) != "orld" {
		t.Fatalf("spare gave %d bytes, queue %q", len(room), q.bytes())
	}
	copy(room, "!?")
	q.grow(2)
	if got := string(q.bytes()); got != "orld!?" {
		t.Fatalf("after grow: %q", got)
	}
	q.discard(q.len())
	if q.len() != 0 || q.r != 0 || len(q.b) != 0 {
		t.Fatalf("an emptied queue keeps %d bytes at %d", len(q.b), q.r)
	}
	if !bytes.Equal(q.spare(1)[:0], []byte{}) {
		t.Fatal("spare of an empty queue")
	}
}

// loopCipher on the loop: reads what the loop gave it, then errLoopEmpty, a temporary
// net.Error (which crypto/tls does not keep); writes go to out.
func TestLoopCipherOnTheLoop(t *testing.T) {
	w := &loopCipher{onLoop: true}
	w.in.write([]byte("abc"))
	p := make([]byte, 8)
	if n, err := w.Read(p); n != 3 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	_, err := w.Read(p)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("empty read: %v, want a timeout net.Error", err)
	}
	if n, err := w.Write([]byte("xyz")); n != 3 || err != nil || string(w.out) != "xyz" {
		t.Fatalf("write %d, %v, out %q", n, err, w.out)
	}
}
