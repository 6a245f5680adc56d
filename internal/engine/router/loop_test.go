package router

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
)

// The event-loop server (loop.go) through real connections: what it serves itself, what
// it hands to the lean server, and the router's rules on its path.

func loopRouter(t *testing.T, timeout time.Duration, maxConc int, bs ...*testBackend) (*Router, *frontServer) {
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

// waitServed waits until the loops counted n requests: a client can read the end of a
// response before the loop that sent it counted it.
func waitServed(t *testing.T, f *frontServer, n int64) {
	t.Helper()
	deadline := time.Now().Add(failsafe)
	for f.loops.served.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := f.loops.served.Load(); got != n {
		t.Fatalf("loops served %d requests, want %d", got, n)
	}
}

func TestLoopServesTheUsualRequestItself(t *testing.T) {
	b := newBackend(t, "b0")
	r, f := loopRouter(t, time.Minute, 4, b)
	res := loopPost(t, f, testPrimary, `{"x":1}`)
	if res.StatusCode != http.StatusOK || readAll(t, res) != "b0" {
		t.Fatalf("status %d, want 200 from b0", res.StatusCode)
	}
	if got := res.Header.Get(DeploymentHeader); got != "blue" {
		t.Errorf("%s = %q, want blue", DeploymentHeader, got)
	}
	id := res.Header.Get(RequestIDHeader)
	if id == "" || id == "backend-must-not-override" {
		t.Errorf("X-Request-Id = %q, want the router's", id)
	}
	if res.Header.Get("X-Backend") != "b0" || res.Header.Get("Date") == "" {
		t.Errorf("response header %v lacks the instance's X-Backend or a Date", res.Header)
	}
	seen := b.requests()
	if len(seen) != 1 {
		t.Fatalf("backend got %d requests, want 1", len(seen))
	}
	got := seen[0]
	if got.Path != "/score" || got.Body != `{"x":1}` || got.Header.Get("Authorization") != "" ||
		got.Header.Get(RequestIDHeader) != id || got.Header.Get("X-Forwarded-For") != "127.0.0.1" {
		t.Errorf("backend saw %+v", got)
	}
	waitServed(t, f, 1)
	if n := f.loops.handedOff.Load(); n != 0 {
		t.Errorf("loops handed off %d connections, want 0", n)
	}
	if st := r.Stats("ep")["blue"]; st.Requests != 1 || st.Responses2xx != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v, want one 2xx request and nothing in flight", st)
	}
}

func TestLoopHandsOffWhatTheLeanServerAnswers(t *testing.T) {
	b := newBackend(t, "b0")
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
	if reqs := b.requests(); len(reqs) != 1 || reqs[0].Body != "abcd" {
		t.Fatalf("backend saw %+v, want one request with body abcd", reqs)
	}
	if f.loops.handedOff.Load() < 1 || f.loops.served.Load() != 0 {
		t.Errorf("handed off %d, served %d: want hand-offs only", f.loops.handedOff.Load(), f.loops.served.Load())
	}
}

func TestLoopAnswers429WhenFullAnd504AfterTheTimeout(t *testing.T) {
	b := newHoldingBackend(t, "b0")
	r, f := loopRouter(t, 300*time.Millisecond, 1, b)
	first := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, f.URL+ScoringPath("ep"), strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+testPrimary)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(first)
			return
		}
		first <- res
	}()
	wait(t, b.entered, "the first request at the instance")
	busy := loopPost(t, f, testPrimary, "{}")
	if busy.StatusCode != http.StatusTooManyRequests || busy.Header.Get(DeploymentHeader) != "blue" {
		t.Fatalf("second request: status %d (%v), want 429 naming blue", busy.StatusCode, busy.Header)
	}
	res := wait(t, first, "the first response")
	if res == nil {
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusGatewayTimeout || !strings.Contains(readAll(t, res), `"timeout"`) {
		t.Fatalf("held request: status %d, want 504 with code timeout", res.StatusCode)
	}
	wait(t, b.canceled, "the instance to see its request end")
	waitServed(t, f, 2) // the 429 and the 504
	st := r.Stats("ep")["blue"]
	if st.Rejected429 != 1 || st.Timeouts != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v, want one 429, one timeout, nothing in flight", st)
	}
}

func TestLoopClientGoneEndsTheInstanceRequest(t *testing.T) {
	b := newHoldingBackend(t, "b0")
	r, f := loopRouter(t, time.Minute, 1, b)
	c := dialLoops(t, f.Listener.Addr().String())
	_, _ = io.WriteString(c, rawScoreRequest(""))
	wait(t, b.entered, "the request at the instance")
	_ = c.Close()
	wait(t, b.canceled, "the instance to see its request end")
	waitServed(t, f, 1) // counted when its slot is free
	if st := r.Stats("ep")["blue"]; st.ClientCanceled != 1 || st.InFlight != 0 {
		t.Fatalf("stats %+v, want one canceled request and its slot free", st)
	}
}

func TestLoopRetriesOnAnotherInstanceWhenOneCannotBeReached(t *testing.T) {
	live := newBackend(t, "live")
	dead := newBackend(t, "dead")
	dead.Close() // its port now refuses connections
	r := newTestRouter(t, Options{Rand: func() float64 { return 0 }})
	d := deployment("blue", 4, dead, live)
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))
	f := newFront(t, r)
	for i := 0; i < 4; i++ {
		res := loopPost(t, f, testPrimary, "{}")
		if res.StatusCode != http.StatusOK || readAll(t, res) != "live" {
			t.Fatalf("request %d: status %d, want 200 from live", i, res.StatusCode)
		}
	}
	waitServed(t, f, 4)
	if st := r.Stats("ep")["blue"]; st.Retries == 0 || st.Responses2xx != 4 {
		t.Fatalf("stats %+v, want retries and four 2xx", st)
	}
}

func TestLoopPassesOnEveryResponseFraming(t *testing.T) {
	cases := []struct {
		name, response string
		closeAfter     bool
		body           string
		trailer        string
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello", false, "hello", ""},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3;ext=1\r\nhel\r\n2\r\nlo\r\n0\r\nX-Sum: 5\r\n\r\n", false, "hello", "5"},
		{"until close", "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello", true, "hello", ""},
		{"interim first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello", false, "hello", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRouter(t, Options{})
			r.SetEndpoint(Endpoint{Name: "ep", AuthMode: AuthModeKey, Keys: [2]string{testPrimary},
				Traffic: map[string]int{"blue": 100},
				Deployments: map[string]*Deployment{"blue": {Backends: []Backend{
					{ID: "raw", URL: &url.URL{Scheme: "http", Host: fixedBackend(t, []byte(tc.response), tc.closeAfter)}, Ready: true}}}}})
			f := newFront(t, r)
			for i := 0; i < 2; i++ { // the second request takes the kept connection, or a new one
				res := loopPost(t, f, testPrimary, "{}")
				if got := readAll(t, res); got != tc.body {
					t.Fatalf("request %d: body %q, want %q", i, got, tc.body)
				}
				if res.Trailer.Get("X-Sum") != tc.trailer {
					t.Errorf("trailer X-Sum = %q, want %q", res.Trailer.Get("X-Sum"), tc.trailer)
				}
			}
			waitServed(t, f, 2)
		})
	}
}

func TestLoopAnswersPipelinedRequestsInOrder(t *testing.T) {
	b := newBackend(t, "b0")
	_, f := loopRouter(t, time.Minute, 4, b)
	c := dialLoops(t, f.Listener.Addr().String())
	_, _ = io.WriteString(c, rawScoreRequest("X-Request-Id: r1\r\n")+rawScoreRequest("X-Request-Id: r2\r\n"))
	br := bufio.NewReader(c)
	for _, want := range []string{"r1", "r2"} {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, res)
		if res.StatusCode != http.StatusOK || body != "b0" || res.Header.Get(RequestIDHeader) != want {
			t.Fatalf("response %s: status %d, body %q, id %q", want, res.StatusCode, body, res.Header.Get(RequestIDHeader))
		}
	}
}

func TestLoopHandsOffAHeadThatArrivesInPieces(t *testing.T) {
	b := newBackend(t, "b0")
	_, f := loopRouter(t, time.Minute, 4, b)
	c := dialLoops(t, f.Listener.Addr().String())
	req := rawScoreRequest("")
	firstLines := len("POST /ep/score HTTP/1.1\r\nHost: x\r\n")
	_, _ = io.WriteString(c, req[:firstLines])
	deadline := time.Now().Add(failsafe)
	for f.loops.handedOff.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
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
	b := newHoldingBackend(t, "b0")
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
	wait(t, b.entered, "the request at the instance")

	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	// The idle connection is closed; the request in flight is not cut.
	if n, err := idle.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("idle connection: read %d bytes, %v; want it closed", n, err)
	}
	b.releaseAll()
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
