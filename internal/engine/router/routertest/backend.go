package routertest

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

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
)

// seenRequest is what a backend received.
type seenRequest struct {
	Method   string
	Path     string
	RawPath  string
	RawQuery string
	Header   http.Header
	Body     string
}

// backend is an instance: it answers 200 with its name and records what it got. When
// hold is set, each request signals entered and then waits for release (or for its own
// context to end, which it reports on canceled).
type backend struct {
	*httptest.Server
	name     string
	hits     atomic.Int64
	opened   atomic.Int64 // connections the router opened to it
	mu       sync.Mutex
	seen     []seenRequest
	hold     bool
	entered  chan string
	release  chan struct{}
	canceled chan struct{}
}

func newBackend(t testing.TB, name string) *backend { return newBackendWith(t, name, nil) }

// newBackendWith is a backend answering with h (nil: the backend's own answer), its
// connections counted.
func newBackendWith(t testing.TB, name string, h http.Handler) *backend {
	t.Helper()
	b := &backend{
		name:     name,
		entered:  make(chan string, 64),
		release:  make(chan struct{}),
		canceled: make(chan struct{}, 64),
	}
	if h == nil {
		h = http.HandlerFunc(b.serve)
	}
	b.Server = httptest.NewUnstartedServer(h)
	b.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			b.opened.Add(1)
		}
	}
	b.Start()
	t.Cleanup(b.Close)
	return b
}

// newHoldingBackend is a backend whose requests wait for release.
func newHoldingBackend(t testing.TB, name string) *backend {
	b := newBackend(t, name)
	b.hold = true
	// Unblock held requests before the server's Close waits for them.
	t.Cleanup(b.releaseAll)
	return b
}

func (b *backend) releaseAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

func (b *backend) serve(w http.ResponseWriter, r *http.Request) {
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
		b.entered <- r.Header.Get(router.RequestIDHeader)
		select {
		case <-b.release:
		case <-r.Context().Done():
			b.canceled <- struct{}{}
			return
		}
	}
	w.Header().Set("X-Backend", b.name)
	w.Header().Set(router.RequestIDHeader, "backend-must-not-override")
	_, _ = io.WriteString(w, b.name)
}

func (b *backend) requests() []seenRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]seenRequest(nil), b.seen...)
}

func (b *backend) instance(id string) router.Backend {
	u, err := url.Parse(b.URL)
	if err != nil {
		panic(err)
	}
	return router.Backend{ID: id, URL: u, Ready: true}
}

// fixedBackend is an instance that answers every request it reads with the bytes res,
// then closes the connection when closeAfter is set. It returns its address.
func fixedBackend(t testing.TB, res []byte, closeAfter bool) string {
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
			go func() {
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
			}()
		}
	}()
	return ln.Addr().String()
}
