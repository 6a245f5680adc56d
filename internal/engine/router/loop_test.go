package router

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
)

// The event-loop server (loop.go) through real connections: what it serves itself, what
// it hands to the lean server, and the router's rules on its path.

func loopRouter(t *testing.T, timeout time.Duration, maxConc int, bs ...*testbackend.Backend) (*Router, *frontServer) {
	t.Helper()
	r := newTestRouter(t, Options{})
	d := deployment("blue", maxConc, bs...)
	d.RequestTimeout = timeout
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))
	return r, newFront(t, r)
}

func loopPost(t *testing.T, f *frontServer, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.URL+ScoringPath("ep"), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

// rawScoreRequest is a scoring request for endpoint ep with the primary key, the header
// lines in extra (each ending in CRLF) and the body {}.
func rawScoreRequest(extra string) string {
	return "POST /ep/score HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testPrimary + "\r\n" + extra +
		"Content-Length: 2\r\n\r\n{}"
}

// dialLoops opens a client connection to addr, closed when the test ends, whose reads
// give up after failsafe.
func dialLoops(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(failsafe))
	return c
}

// The router's behaviour on the loops is routertest's (serving_test.go); this checks that
// the loops answer the usual request themselves rather than handing it off.
func TestLoopServesTheUsualRequestItself(t *testing.T) {
	b := testbackend.New(t, "b0")
	_, f := loopRouter(t, time.Minute, 4, b)
	res := loopPost(t, f, testPrimary, `{"x":1}`)
	if res.StatusCode != http.StatusOK || readAll(t, res) != "b0" {
		t.Fatalf("status %d, want 200 from b0", res.StatusCode)
	}
	// A client can read the end of a response before the server counted it.
	f.over.await(t, 1, "the request to be over")
	if served, handedOff := f.loops.served.Load(), f.loops.handedOff.Load(); served != 1 || handedOff != 0 {
		t.Errorf("loops served %d requests and handed off %d connections, want 1 and 0", served, handedOff)
	}
}

func TestLoopHandsOffWhatTheLeanServerAnswers(t *testing.T) {
	b := testbackend.New(t, "b0")
	_, f := loopRouter(t, time.Minute, 4, b)
	res := loopPost(t, f, "wrong-key", "{}")
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key: status %d, want 401", res.StatusCode)
	}
	// A chunked upload is the lean server's (net/http's) too.
	req, _ := http.NewRequest(http.MethodPost, f.URL+ScoringPath("ep"), io.MultiReader(strings.NewReader("ab"), strings.NewReader("cd")))
	req.Header.Set("Authorization", "Bearer "+testPrimary)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || readAll(t, res) != "b0" {
		t.Fatalf("chunked upload: status %d, want 200 from b0", res.StatusCode)
	}
	if reqs := b.Requests(); len(reqs) != 1 || reqs[0].Body != "abcd" {
		t.Fatalf("backend saw %+v, want one request with body abcd", reqs)
	}
	if f.loops.handedOff.Load() < 1 || f.loops.served.Load() != 0 {
		t.Errorf("handed off %d, served %d: want hand-offs only", f.loops.handedOff.Load(), f.loops.served.Load())
	}
}

func TestLoopHandsOffAHeadThatArrivesInPieces(t *testing.T) {
	b := testbackend.New(t, "b0")
	_, f := loopRouter(t, time.Minute, 4, b)
	c := dialLoops(t, f.Listener.Addr().String())
	req := rawScoreRequest("")
	firstLines := len("POST /ep/score HTTP/1.1\r\nHost: x\r\n")
	_, _ = io.WriteString(c, req[:firstLines])
	// The loops see a head in pieces and hand the connection off before the rest comes.
	f.handedOff.await(t, 1, "the connection to be handed off")
	_, _ = io.WriteString(c, req[firstLines:])
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != http.StatusOK || body != "b0" {
		t.Fatalf("status %d body %q, want 200 from b0", res.StatusCode, body)
	}
	if f.loops.handedOff.Load() != 1 || f.loops.served.Load() != 0 {
		t.Fatalf("handed off %d, served %d: want the lean server to have served it", f.loops.handedOff.Load(), f.loops.served.Load())
	}
}

func TestLoopShutdownFinishesRequestsInFlightAndClosesIdleConnections(t *testing.T) {
	b := testbackend.NewHolding(t, "b0")
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 4, b)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	type observed struct {
		endpoint, deployment string
		status               int
	}
	seen := make(chan observed, 4)
	srv := &LoopServer{Router: r, Fallback: &leanserver.Server{Handler: r}, Loops: 2,
		Observe: func(endpoint, deployment string, status int, _ time.Duration) {
			seen <- observed{endpoint, deployment, status}
		}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	idle := dialLoops(t, ln.Addr().String())
	busy := dialLoops(t, ln.Addr().String())
	_, _ = io.WriteString(busy, rawScoreRequest(""))
	wait(t, b.Entered, "the request at the instance")

	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	// The idle connection is closed; the request in flight is not cut.
	if n, err := idle.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("idle connection: read %d bytes, %v; want it closed", n, err)
	}
	b.ReleaseAll()
	res, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != http.StatusOK || body != "b0" || !res.Close {
		t.Fatalf("status %d body %q close %v, want 200 from b0 with Connection: close", res.StatusCode, body, res.Close)
	}
	if err := wait(t, shut, "Shutdown"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := wait(t, served, "Serve to return"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Serve returned %v, want net.ErrClosed", err)
	}
	if got := wait(t, seen, "the request's observation"); got != (observed{"ep", "blue", http.StatusOK}) {
		t.Fatalf("observed %+v, want ep/blue 200", got)
	}
}
