package router

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
)

// failsafe bounds every wait in these tests so a bug hangs nothing; no test asserts on
// how long anything takes.
const failsafe = 10 * time.Second

const (
	testPrimary   = "primary-key-0123456789"
	testSecondary = "secondary-key-9876543210"
)

// backendOf is b as a ready instance of a deployment, named id.
func backendOf(b *testbackend.Backend, id string) Backend {
	return Backend{ID: id, URL: b.Address(), Ready: true}
}

// deployment is a deployment with one instance per backend.
func deployment(name string, maxConc int, bs ...*testbackend.Backend) *Deployment {
	d := &Deployment{Name: name, MaxConcurrentPerInstance: maxConc, RequestTimeout: time.Minute}
	for i, b := range bs {
		d.Backends = append(d.Backends, backendOf(b, name+"-"+string(rune('0'+i))))
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
	// over counts the requests that are over on the server's side, their slots released
	// and their statistics counted: those the loops answered (Observe) and those the
	// handler returned from.
	over      tally
	handedOff tally // connections the loops handed to the lean server
	close     func() error
	loops     *LoopServer // nil for a handler that is not a router
	// handshakesFailed gets each failed TLS handshake's error (a TLS front's).
	handshakesFailed chan error
}

func newFront(t testing.TB, h http.Handler) *frontServer { return newFrontTLS(t, h, nil) }

// newFrontTLS is newFront serving TLS with cfg when it is not nil: the loops run the
// handshakes (a router) or the lean server serves a TLS listener (another handler).
func newFrontTLS(t testing.TB, h http.Handler, cfg *tls.Config) *frontServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http"
	if cfg != nil {
		scheme = "https"
	}
	f := &frontServer{URL: scheme + "://" + ln.Addr().String(), handshakesFailed: make(chan error, 16)}
	f.Listener = &countingListener{Listener: ln, accepted: &f.accepted}
	counted := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		defer f.over.add()
		h.ServeHTTP(w, req)
	})
	lean := &leanserver.Server{Handler: counted, ReadHeaderTimeout: failsafe,
		HandshakeFailed: func(_ string, err error) { f.handshakesFailed <- err }}
	if r, ok := h.(*Router); ok {
		srv := &LoopServer{Router: r, Fallback: lean, Logger: r.log, Loops: 2, TLSConfig: cfg,
			Observe:   func(string, string, int, time.Duration) { f.over.add() },
			onHandOff: f.handedOff.add}
		f.close, f.loops = srv.Close, srv
		go func() { _ = srv.Serve(f.Listener) }()
	} else {
		f.close = lean.Close
		ln := f.Listener
		if cfg != nil {
			ln = tls.NewListener(ln, cfg)
		}
		go func() { _ = lean.Serve(ln) }()
	}
	t.Cleanup(f.Close)
	return f
}

func (f *frontServer) Close() { _ = f.close() }

// tally counts events; a test waits for a count instead of polling for it.
type tally struct {
	mu   sync.Mutex
	n    int64
	wake chan struct{} // closed by the next add
}

func (c *tally) add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.wake != nil {
		close(c.wake)
		c.wake = nil
	}
}

// await waits until the count is at least n.
func (c *tally) await(t testing.TB, n int64, what string) {
	t.Helper()
	for {
		c.mu.Lock()
		if c.n >= n {
			c.mu.Unlock()
			return
		}
		if c.wake == nil {
			c.wake = make(chan struct{})
		}
		wake := c.wake
		c.mu.Unlock()
		wait(t, wake, what)
	}
}

// armingClock is a fake clock that tells the test each timer armed on it (made by
// AfterFunc or NewTimer: a timer's own Reset is not seen), so that the test steps it only
// once the code under test waits on it.
type armingClock struct {
	*testclock.FakeClock
	mu    sync.Mutex
	armed map[time.Duration]*tally
}

func newArmingClock() *armingClock {
	return &armingClock{FakeClock: testclock.NewFakeClock(time.Unix(1_700_000_000, 0)), armed: map[time.Duration]*tally{}}
}

func (c *armingClock) tallyOf(d time.Duration) *tally {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed[d] == nil {
		c.armed[d] = &tally{}
	}
	return c.armed[d]
}

func (c *armingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.FakeClock.AfterFunc(d, f)
	c.tallyOf(d).add()
	return t
}

func (c *armingClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.tallyOf(d).add()
	return t
}

// awaitTimer waits until n timers of length d were armed.
func (c *armingClock) awaitTimer(t testing.TB, d time.Duration, n int64) {
	t.Helper()
	c.tallyOf(d).await(t, n, fmt.Sprintf("a %v timer to be armed", d))
}

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
