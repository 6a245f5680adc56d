// Package testbackend is the model instance the router's tests send requests to: an
// HTTP server on loopback that answers with its name and records what it got, or one
// that writes fixed bytes. Both the router's own tests and its conformance table
// (routertest) use it; it imports nothing of the router's, so the router's in-package
// tests can use it without an import cycle.
package testbackend

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// RequestIDHeader is the router's request id header (router.RequestIDHeader, which this
// package cannot import): a backend echoes a wrong one to check the router keeps its own.
const RequestIDHeader = "X-Request-Id"

// Request is what a backend received.
type Request struct {
	Method   string
	Path     string
	RawPath  string
	RawQuery string
	Header   http.Header
	Body     string
}

// Backend is an instance: it answers 200 with its name and records what it got. A
// holding backend's requests each report on Entered and then wait for ReleaseAll (or
// for their own context to end, which they report on Canceled).
type Backend struct {
	*httptest.Server
	Name string
	// Hits counts the requests that reached the handler.
	Hits atomic.Int64
	// Opened counts the connections made to the backend; Closed gets a token for each
	// one closed or hijacked (dropped when its buffer is full: wait on it only for a few).
	Opened   atomic.Int64
	Closed   chan struct{}
	Entered  chan string // a holding backend's request ids, as they arrive
	Canceled chan struct{}

	mu      sync.Mutex
	seen    []Request
	hold    bool
	release chan struct{}
}

// New is a backend that answers with its name.
func New(t testing.TB, name string) *Backend { return NewWith(t, name, nil) }

// NewHolding is a backend whose requests wait for ReleaseAll.
func NewHolding(t testing.TB, name string) *Backend {
	b := newBackend(name)
	b.hold = true
	b.start(t, nil)
	// Unblock held requests before the server's Close waits for them.
	t.Cleanup(b.ReleaseAll)
	return b
}

// NewWith is a backend answering with h (nil: the backend's own answer).
func NewWith(t testing.TB, name string, h http.Handler) *Backend {
	b := newBackend(name)
	b.start(t, h)
	return b
}

func newBackend(name string) *Backend {
	return &Backend{
		Name:     name,
		Closed:   make(chan struct{}, 256),
		Entered:  make(chan string, 64),
		Canceled: make(chan struct{}, 64),
		release:  make(chan struct{}),
	}
}

func (b *Backend) start(t testing.TB, h http.Handler) {
	t.Helper()
	if h == nil {
		h = http.HandlerFunc(b.serve)
	}
	b.Server = httptest.NewUnstartedServer(h)
	b.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			b.Opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			select {
			case b.Closed <- struct{}{}:
			default:
			}
		}
	}
	b.Start()
	t.Cleanup(b.Close)
}

// ReleaseAll lets every held request, and every later one, answer.
func (b *Backend) ReleaseAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

func (b *Backend) serve(w http.ResponseWriter, r *http.Request) {
	b.Hits.Add(1)
	// Reading the whole body lets the server notice a closed connection (and cancel the
	// request context) while the handler waits.
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.seen = append(b.seen, Request{
		Method: r.Method, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: string(body),
	})
	b.mu.Unlock()
	if b.hold {
		b.Entered <- r.Header.Get(RequestIDHeader)
		select {
		case <-b.release:
		case <-r.Context().Done():
			b.Canceled <- struct{}{}
			return
		}
	}
	w.Header().Set("X-Backend", b.Name)
	w.Header().Set(RequestIDHeader, "backend-must-not-override")
	_, _ = io.WriteString(w, b.Name)
}

// Requests returns what the backend received, in order.
func (b *Backend) Requests() []Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Request(nil), b.seen...)
}

// Address is the backend's URL, parsed.
func (b *Backend) Address() *url.URL {
	u, err := url.Parse(b.URL)
	if err != nil {
		panic(err)
	}
	return u
}

// ServeConns runs serve on its own goroutine for each connection to a new loopback
// listener, which closes when the test ends, and returns the listener's address.
func ServeConns(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// Fixed is an instance that answers every request it reads with the bytes res, then
// closes the connection when closeAfter is set. It returns its address.
func Fixed(t testing.TB, res []byte, closeAfter bool) string {
	t.Helper()
	return ServeConns(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if _, err := c.Write(res); err != nil || closeAfter {
				return
			}
		}
	})
}

// Dead is the URL of a loopback port that was just closed: an instance that cannot be
// connected to.
func Dead(t testing.TB) *url.URL {
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
