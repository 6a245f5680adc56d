package router

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
)

// failsafe bounds every wait in these tests so a bug hangs nothing; no test asserts on
// how long anything takes.
const failsafe = 10 * time.Second

const (
	testPrimary   = "primary-key-0123456789"
	testSecondary = "secondary-key-9876543210"
)

// seenRequest is what a test backend received.
type seenRequest struct {
	Method   string
	Path     string
	RawPath  string
	RawQuery string
	Header   http.Header
	Body     string
}

// testBackend is an instance: it answers 200 with its name and records what it got.
// When hold is set, each request signals entered and then waits for release (or for its
// own context to end, which it reports on canceled).
type testBackend struct {
	*httptest.Server
	name     string
	hits     atomic.Int64
	mu       sync.Mutex
	seen     []seenRequest
	hold     bool
	entered  chan string
	release  chan struct{}
	canceled chan struct{}
}

func newBackend(t testing.TB, name string) *testBackend {
	t.Helper()
	b := &testBackend{
		name:     name,
		entered:  make(chan string, 64),
		release:  make(chan struct{}),
		canceled: make(chan struct{}, 64),
	}
	b.Server = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.Close)
	return b
}

// newHoldingBackend is a backend whose requests wait for release.
func newHoldingBackend(t testing.TB, name string) *testBackend {
	b := newBackend(t, name)
	b.hold = true
	// Unblock held requests before the server's Close waits for them.
	t.Cleanup(b.releaseAll)
	return b
}

func (b *testBackend) releaseAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

func (b *testBackend) serve(w http.ResponseWriter, r *http.Request) {
	b.hits.Add(1)
	// Reading the whole body lets the server notice a closed connection (and cancel the
	// request context) while the handler waits.
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.seen = append(b.seen, seenRequest{
		Method: r.Method, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: string(body),
	})
	b.mu.Unlock()
	if b.hold {
		b.entered <- r.Header.Get(RequestIDHeader)
		select {
		case <-b.release:
		case <-r.Context().Done():
			b.canceled <- struct{}{}
			return
		}
	}
	w.Header().Set("X-Backend", b.name)
	w.Header().Set(RequestIDHeader, "backend-must-not-override")
	_, _ = io.WriteString(w, b.name)
}

func (b *testBackend) requests() []seenRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]seenRequest(nil), b.seen...)
}

func (b *testBackend) backend(id string) Backend {
	u, err := url.Parse(b.URL)
	if err != nil {
		panic(err)
	}
	return Backend{ID: id, URL: u, Ready: true}
}

// deployment is a deployment with one instance per backend.
func deployment(name string, maxConc int, bs ...*testBackend) *Deployment {
	d := &Deployment{Name: name, MaxConcurrentPerInstance: maxConc, RequestTimeout: time.Minute}
	for i, b := range bs {
		d.Backends = append(d.Backends, b.backend(name+"-"+string(rune('0'+i))))
	}
	return d
}

func keyEndpoint(name string, traffic map[string]int, deps ...*Deployment) Endpoint {
	e := Endpoint{
		Name:        name,
		AuthMode:    AuthModeKey,
		Keys:        [2]string{testPrimary, testSecondary},
		Traffic:     traffic,
		Deployments: map[string]*Deployment{},
	}
	for _, d := range deps {
		e.Deployments[d.Name] = d
	}
	return e
}

func newTestRouter(t testing.TB, opts Options) *Router {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	}
	r := New(opts)
	t.Cleanup(r.Close)
	return r
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func scoreRequest(endpoint, key, body string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, ScoringPath(endpoint), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req
}

// serve runs one request through the router and returns its recorded response. ServeHTTP
// has returned (and released its instance slot) when serve returns.
func serve(r *Router, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	return rec
}

// serveAsync runs a request on its own goroutine.
func serveAsync(r *Router, req *http.Request) <-chan *httptest.ResponseRecorder {
	ch := make(chan *httptest.ResponseRecorder, 1)
	go func() { ch <- serve(r, req) }()
	return ch
}

func wait[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(failsafe):
		t.Fatalf("gave up waiting for %s", what)
		var zero T
		return zero
	}
}

func decodeError(t testing.TB, rec *httptest.ResponseRecorder) *Error {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type = %q, want application/json (body %q)", ct, rec.Body.String())
	}
	var body ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == nil {
		t.Fatalf("error body %q is not an error envelope: %v", rec.Body.String(), err)
	}
	return body.Error
}

func expectStatus(t testing.TB, rec *httptest.ResponseRecorder, want int) {
	t.Helper()
	if rec.Code != want {
		t.Fatalf("status = %d, want %d (body %q)", rec.Code, want, rec.Body.String())
	}
}

// sequence is a Rand that returns vals in order and fails the test when they run out.
func sequence(t testing.TB, vals ...float64) func() float64 {
	var mu sync.Mutex
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		if len(vals) == 0 {
			t.Error("Rand called more often than the test expected")
			return 0
		}
		v := vals[0]
		vals = vals[1:]
		return v
	}
}

// frontServer serves a router the way the engine does: on the event loops, which hand
// anything but the usual scoring request to the lean HTTP/1.1 server, which hands unusual
// requests to net/http (LoopServer, internal/engine/router/leanserver). A handler that is not a
// router gets the lean server alone.
type frontServer struct {
	URL      string
	Listener net.Listener
	accepted atomic.Int64 // client connections accepted
	close    func() error
	loops    *LoopServer // nil for a handler that is not a router
}

func newFront(t testing.TB, h http.Handler) *frontServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &frontServer{URL: "http://" + ln.Addr().String()}
	f.Listener = &countingListener{Listener: ln, accepted: &f.accepted}
	lean := &leanserver.Server{Handler: h, ReadHeaderTimeout: failsafe}
	if r, ok := h.(*Router); ok {
		srv := &LoopServer{Router: r, Fallback: lean, Logger: r.log, Loops: 2}
		f.close, f.loops = srv.Close, srv
		go func() { _ = srv.Serve(f.Listener) }()
	} else {
		f.close = lean.Close
		go func() { _ = lean.Serve(f.Listener) }()
	}
	t.Cleanup(f.Close)
	return f
}

func (f *frontServer) Close() { _ = f.close() }

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// deadAddress is the URL of a loopback port that was just closed.
func deadAddress(t testing.TB) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return &url.URL{Scheme: "http", Host: addr}
}
