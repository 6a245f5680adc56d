package leanserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
)

// served runs h on a lean server and on a plain net/http server, both on loopback.
type served struct {
	lean, plain string // host:port
	srv         *Server
}

func serve(t *testing.T, h http.Handler) *served { t.Helper(); return serveOn(t, h, nil) }

// serveOn is serve with the lean server on clk (nil: the real clock).
func serveOn(t *testing.T, h http.Handler, clk clock.WithDelayedExecution) *served {
	t.Helper()
	s := &Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, Clock: clk}
	ln := listen(t)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	plainLn := listen(t)
	plain := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = plain.Serve(plainLn) }()
	t.Cleanup(func() {
		_ = s.Close()
		_ = plain.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return &served{lean: ln.Addr().String(), plain: plainLn.Addr().String(), srv: s}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// rawConn is a client connection that writes raw bytes and reads responses.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatal(err)
	}
}

// response reads one response to a request with the given method.
func (c *rawConn) response(method string) (*http.Response, string) {
	c.t.Helper()
	res, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		c.t.Fatalf("reading the response: %v", err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatalf("reading the response body: %v", err)
	}
	return res, string(b)
}

// closed reports whether the server closed the connection (after any response).
func (c *rawConn) closed() bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.br.ReadByte()
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// echo answers with what it saw of the request.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, lean := r.Context().Value(http.ServerContextKey).(*http.Server)
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	keys := make([]string, 0, len(r.Header))
	for k, v := range r.Header {
		keys = append(keys, k+"="+strings.Join(v, ","))
	}
	sortStrings(keys)
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "method=%s path=%s rawpath=%s query=%s forcequery=%v uri=%s host=%s length=%d close=%v server=%v local=%v remote=%v\nheaders=%s\nbody=%s",
		r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.URL.ForceQuery, r.RequestURI, r.Host, r.ContentLength,
		r.Close, lean, local != nil, r.RemoteAddr != "", strings.Join(keys, ";"), body)
})

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// TestUsualRequestsAreServedAsNetHTTPServesThem sends the same requests, as raw bytes,
// to the lean server and to net/http and compares what the handler saw and what the
// client got. Each case also says whether the lean server serves it itself or hands it
// to net/http.
func TestUsualRequestsAreServedAsNetHTTPServesThem(t *testing.T) {
	cases := []struct {
		name, request string
		method        string
		lean          bool
	}{
		{"post with body", "POST /ep/score HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello", "POST", true},
		{"get", "GET /ep/score?a=1&b=%20 HTTP/1.1\r\nHost: example.com:80\r\nUser-Agent: t\r\n\r\n", "GET", true},
		{"lower-case names, repeated header", "POST /p HTTP/1.1\r\nhost: x\r\nx-thing: a\r\nX-Thing: b\r\ncontent-length: 0\r\n\r\n", "POST", true},
		{"value white space", "GET /p HTTP/1.1\r\nHost: x\r\nX-A:   spaced value \t\r\n\r\n", "GET", true},
		{"force query", "GET /p? HTTP/1.1\r\nHost: x\r\n\r\n", "GET", true},
		{"connection close", "GET /p HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "GET", true},
		{"empty host", "GET /p HTTP/1.1\r\nHost:\r\n\r\n", "GET", true},
		{"other method", "REPORT /p HTTP/1.1\r\nHost: x\r\n\r\n", "REPORT", true},
		// Handed to net/http.
		{"chunked body", "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "POST", false},
		{"expect", "POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", "POST", false},
		{"http/1.0", "GET /p HTTP/1.0\r\nHost: x\r\n\r\n", "GET", false},
		{"head", "HEAD /p HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD", false},
		{"absolute form", "GET http://x/p HTTP/1.1\r\nHost: x\r\n\r\n", "GET", false},
		{"escaped path", "GET /a%2Fb/score HTTP/1.1\r\nHost: x\r\n\r\n", "GET", false},
		{"path net/url keeps raw", "GET /a(b)!/score HTTP/1.1\r\nHost: x\r\n\r\n", "GET", false},
		{"bare LF", "GET /p HTTP/1.1\nHost: x\n\n", "GET", false},
		{"no host", "GET /p HTTP/1.1\r\nX: y\r\n\r\n", "GET", false},
		{"two hosts", "GET /p HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", "GET", false},
		{"two lengths", "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nh", "POST", false},
		{"bad length", "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", "POST", false},
		{"bad name", "GET /p HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n", "GET", false},
		{"folded line", "GET /p HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", "GET", false},
		{"control in value", "GET /p HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", "GET", false},
		{"bad host", "GET /p HTTP/1.1\r\nHost: a b\r\n\r\n", "GET", false},
		{"large head", "GET /p HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 6000) + "\r\n\r\n", "GET", false},
	}
	s := serve(t, echo)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.srv.handoffs.Load()
			got := exchangeRaw(t, s.lean, tc.request, tc.method)
			want := exchangeRaw(t, s.plain, tc.request, tc.method)
			if got != want {
				t.Errorf("the lean server answered\n%s\nnet/http answered\n%s", got, want)
			}
			if handedOff := s.srv.handoffs.Load() != before; handedOff == tc.lean {
				t.Errorf("handed off to net/http: %v, want %v", handedOff, !tc.lean)
			}
		})
	}
}

// exchangeRaw sends one raw request and renders the response without its Date.
func exchangeRaw(t *testing.T, addr, request, method string) string {
	c := dialRaw(t, addr)
	c.send(request)
	res, body := c.response(method)
	res.Header.Del("Date")
	return fmt.Sprintf("%s %v close=%v length=%d\n%s", res.Status, res.Header, res.Close, res.ContentLength, body)
}

func TestKeepAliveAndPipelining(t *testing.T) {
	s := serve(t, echo)
	c := dialRaw(t, s.lean)
	req := "POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
	// Two requests in one write, then a third after the answers.
	c.send(req + strings.Replace(req, "/one", "/two", 1))
	for _, want := range []string{"path=/one", "path=/two"} {
		res, body := c.response("POST")
		if res.StatusCode != 200 || !strings.Contains(body, want) || !strings.Contains(body, "body=abc") {
			t.Fatalf("got %s %q, want 200 with %s", res.Status, body, want)
		}
	}
	c.send(strings.Replace(req, "/one", "/three", 1))
	if _, body := c.response("POST"); !strings.Contains(body, "path=/three") {
		t.Fatalf("third request on the connection: %q", body)
	}
	if n := s.srv.handoffs.Load(); n != 0 {
		t.Errorf("%d connections handed off", n)
	}
}

func TestHandOffKeepsTheConnectionWithNetHTTP(t *testing.T) {
	s := serve(t, echo)
	c := dialRaw(t, s.lean)
	c.send("GET /usual HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, body := c.response("GET"); !strings.Contains(body, "path=/usual") {
		t.Fatal(body)
	}
	c.send("POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, want := range []string{"path=/chunked", "path=/after"} {
		if _, body := c.response("POST"); !strings.Contains(body, want) {
			t.Fatalf("got %q, want %s", body, want)
		}
	}
	if n := s.srv.handoffs.Load(); n != 1 {
		t.Errorf("%d hand-offs, want 1", n)
	}
}

func TestUnreadBodies(t *testing.T) {
	ignore := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	})
	s := serve(t, ignore)

	// A small unread body is read after the handler: the connection is kept.
	c := dialRaw(t, s.lean)
	c.send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789")
	if res, _ := c.response("POST"); res.StatusCode != http.StatusAccepted || res.Close {
		t.Fatalf("got %s close=%v, want 202 kept alive", res.Status, res.Close)
	}
	c.send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nz")
	if res, _ := c.response("POST"); res.StatusCode != http.StatusAccepted {
		t.Fatalf("second request: %s", res.Status)
	}

	// A large one not yet sent is not waited for: the response says the connection closes.
	c = dialRaw(t, s.lean)
	c.send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\nstart")
	if res, _ := c.response("POST"); !res.Close {
		t.Fatalf("got %s without Connection: close", res.Status)
	}
	if !c.closed() {
		t.Fatal("the connection stayed open")
	}
}

// The responses a handler makes come out as net/http makes them.
func TestResponsesMatchNetHTTP(t *testing.T) {
	handlers := map[string]http.HandlerFunc{
		"nothing":     func(w http.ResponseWriter, r *http.Request) {},
		"status only": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) },
		"small body, sniffed": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "<html><body>hi</body></html>")
		},
		"declared length": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "5")
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "12345")
		},
		"large body, chunked": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, strings.Repeat("x", 5000))
		},
		"flushed": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "first ")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "second")
		},
		"declared trailers": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Checksum, X-Count")
			_, _ = io.WriteString(w, "body")
			w.Header().Set("X-Checksum", "abc")
			w.Header().Set("X-Count", "4")
		},
		"prefixed trailer": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "body")
			w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
		},
		"no content": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
			if _, err := io.WriteString(w, "x"); !errors.Is(err, http.ErrBodyNotAllowed) {
				panic(fmt.Sprintf("write after 204: %v", err))
			}
		},
		"not modified": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Etag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		},
		"too much for its length": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "2")
			if _, err := io.WriteString(w, "abc"); !errors.Is(err, http.ErrContentLength) {
				panic(fmt.Sprintf("write past Content-Length: %v", err))
			}
		},
		"header changed after WriteHeader": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Before", "1")
			w.WriteHeader(http.StatusCreated)
			w.Header().Set("X-After", "1")
			_, _ = io.WriteString(w, "done")
		},
		"newline in value": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Bad", "a\r\nInjected: yes")
		},
		"handler asks to close": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		},
		"error helper": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "nope", http.StatusForbidden)
		},
	}
	for name, h := range handlers {
		t.Run(name, func(t *testing.T) {
			s := serve(t, h)
			get := func(addr string) string {
				res, err := http.Get("http://" + addr + "/p")
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				body, err := io.ReadAll(res.Body)
				if err != nil {
					body = append(body, " (then "+err.Error()+")"...)
				}
				res.Header.Del("Date")
				return fmt.Sprintf("%s %v close=%v length=%d chunked=%v trailer=%v\n%q",
					res.Status, res.Header, res.Close, res.ContentLength, res.TransferEncoding, res.Trailer, body)
			}
			if got, want := get(s.lean), get(s.plain); got != want {
				t.Errorf("the lean server answered\n%s\nnet/http answered\n%s", got, want)
			}
			if n := s.srv.handoffs.Load(); n != 0 {
				t.Errorf("%d connections handed off", n)
			}
		})
	}
}

func TestDateHeader(t *testing.T) {
	clk := testclock.NewFakeClock(time.Date(2025, 1, 13, 12, 0, 0, 0, time.UTC))
	s := serveOn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), clk)
	for _, want := range []string{"Mon, 13 Jan 2025 12:00:00 GMT", "Mon, 13 Jan 2025 12:00:01 GMT"} {
		res, err := http.Get("http://" + s.lean + "/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get("Date"); got != want {
			t.Errorf("Date %q, want the server clock's %q", got, want)
		}
		clk.Step(time.Second)
	}
}

func TestInformationalResponses(t *testing.T) {
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		_, _ = io.WriteString(w, "final")
	}))
	var got []int
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		if h["Link"] == nil {
			t.Errorf("1xx without the Link header: %v", h)
		}
		got = append(got, code)
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", "http://"+s.lean+"/", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if len(got) != 1 || got[0] != http.StatusEarlyHints || res.StatusCode != 200 || string(body) != "final" || res.Header.Get("Link") != "" {
		t.Errorf("1xx %v, final %s %q, header %v", got, res.Status, body, res.Header)
	}
}

// watchClock is a fake clock for the watch of a running request.
func watchClock() *testclock.FakeClock {
	return testclock.NewFakeClock(time.Date(2025, 1, 13, 12, 0, 0, 0, time.UTC))
}

// watched is told each time the watch of a request has looked at its connection.
func watched(s *served) <-chan struct{} {
	ch := make(chan struct{}, 16)
	s.srv.onWatch = func() { ch <- struct{}{} }
	return ch
}

func TestClientGoingAwayCancelsTheRequest(t *testing.T) {
	started, canceled := make(chan struct{}), make(chan struct{})
	clk := watchClock()
	s := serveOn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		close(started)
		<-r.Context().Done()
		close(canceled)
	}), clk)
	c := dialRaw(t, s.lean)
	c.send("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
	await(t, started, "the handler to run")
	_ = c.nc.Close()
	clk.Step(watchDelay) // the handler has run for watchDelay: its connection is watched
	await(t, canceled, "the request's context to be canceled after its client went away")
}

// await waits for ch to close or send, failing the test after a failsafe that only
// keeps a bug from hanging the run.
func await[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
	}
}

func TestSlowRequestWithPipelinedNextIsNotCanceled(t *testing.T) {
	clk := watchClock()
	entered, proceed := make(chan struct{}), make(chan struct{})
	s := serveOn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-proceed // the watch has looked at the connection
			if r.Context().Err() != nil {
				http.Error(w, "canceled", http.StatusInternalServerError)
				return
			}
		}
		_, _ = io.WriteString(w, r.URL.Path)
	}), clk)
	looked := watched(s)
	c := dialRaw(t, s.lean)
	c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	await(t, entered, "the slow handler to run")
	clk.Step(watchDelay)
	await(t, looked, "the watch of the slow request")
	close(proceed)
	for _, want := range []string{"/slow", "/next"} {
		if res, body := c.response("GET"); res.StatusCode != 200 || body != want {
			t.Fatalf("got %s %q, want 200 %q", res.Status, body, want)
		}
	}
}

func TestAbortHandlerCutsTheResponse(t *testing.T) {
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, "part")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	res, err := http.Get("http://" + s.lean + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := io.ReadAll(res.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading the cut body: %v, want unexpected EOF", err)
	}
}

func TestReadDeadlineFromTheHandlerCutsTheBody(t *testing.T) {
	got := make(chan error, 1)
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := io.ReadAll(r.Body)
		got <- err
		w.WriteHeader(http.StatusRequestTimeout)
	}))
	c := dialRaw(t, s.lean)
	c.send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	if err := <-got; err == nil {
		t.Fatal("the body read did not fail at the deadline")
	}
	if res, _ := c.response("POST"); res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("got %s", res.Status)
	}
	if !c.closed() {
		t.Fatal("a connection whose body read failed was kept")
	}
}

func TestReadHeaderTimeout(t *testing.T) {
	s := &Server{Handler: echo, ReadHeaderTimeout: 100 * time.Millisecond}
	ln := listen(t)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	c := dialRaw(t, ln.Addr().String())
	c.send("GET /p HTTP/1.1\r\nHost:") // and nothing more
	if !c.closed() {
		t.Fatal("a connection stalled in its request head was kept open")
	}
}

func TestShutdownFinishesRequestsInFlight(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(started) })
		<-release
		_, _ = io.WriteString(w, "finished")
	}))
	idle := dialRaw(t, s.lean)
	busy := dialRaw(t, s.lean)
	busy.send("GET /p HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.srv.Shutdown(ctx)
	}()
	if !idle.closed() {
		t.Error("an idle connection was not closed by Shutdown")
	}
	close(release)
	res, body := busy.response("GET")
	if body != "finished" || !res.Close {
		t.Errorf("the request in flight got %q, close=%v; want its answer and Connection: close", body, res.Close)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", s.lean); err == nil {
		t.Error("the listener still accepts after Shutdown")
	}
}

func TestAfterClientGone(t *testing.T) {
	type notifier interface {
		AfterClientGone(f func()) (stop func() bool)
	}
	ran, stopped, gone := make(chan struct{}), make(chan bool, 1), make(chan struct{})
	clk := watchClock()
	s := serveOn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stopped" {
			stop := w.(notifier).AfterClientGone(func() { t.Error("a stopped callback ran") })
			stopped <- stop()
			return
		}
		w.(notifier).AfterClientGone(func() { close(ran) })
		close(gone)
		<-r.Context().Done()
	}), clk)

	c := dialRaw(t, s.lean)
	c.send("GET /stopped HTTP/1.1\r\nHost: x\r\n\r\n")
	if !<-stopped {
		t.Error("stop of a callback that had not run returned false")
	}
	if res, _ := c.response("GET"); res.StatusCode != 200 {
		t.Fatal(res.Status)
	}

	c.send("GET /gone HTTP/1.1\r\nHost: x\r\n\r\n")
	await(t, gone, "the handler to run")
	clk.Step(watchDelay) // the handler has run for watchDelay: its connection is watched
	_ = c.nc.Close()
	await(t, ran, "the callback to run after the client went away")
}
