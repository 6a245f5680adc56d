package router

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"
)

func TestUpstream_AConnectionTheInstanceClosedIsReplaced(t *testing.T) {
	b := testbackend.New(t, "blue")
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))

	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{"n":1}`)), http.StatusOK)
	// The instance drops the idle connection the router keeps (as after a restart or its
	// own idle timeout); the next request must not fail because of it.
	b.CloseClientConnections()
	wait(t, b.Closed, "the instance to close the idle connection")
	rec := serve(r, scoreRequest("ep", testPrimary, `{"n":2}`))
	expectStatus(t, rec, http.StatusOK)
	if rec.Body.String() != "blue" {
		t.Fatalf("body %q", rec.Body.String())
	}
	if got := b.Opened.Load(); got != 2 {
		t.Fatalf("instance saw %d connections, want 2", got)
	}
	seen := b.Requests()
	if len(seen) != 2 || seen[1].Body != `{"n":2}` {
		t.Fatalf("instance saw %+v", seen)
	}
	if st := r.Stats("ep")["blue"]; st.Retries != 0 || st.Responses2xx != 2 || st.InFlight != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// crashingBackend answers "ok", except that on its crashOn-th request it reads the request
// and drops the connection without an answer, as a model that crashes on it would.
func crashingBackend(t *testing.T, crashOn int64) (*testbackend.Backend, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if hits.Add(1) == crashOn {
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			_ = c.Close()
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(backend.Close)
	return &testbackend.Backend{Server: backend, Name: "blue"}, &hits
}

func TestUpstream_APostTheInstanceReadIsNeverSentAgain(t *testing.T) {
	b, hits := crashingBackend(t, 2)
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))

	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{"n":1}`)), http.StatusOK)
	// The second request goes out on the kept connection, and the instance reads it and
	// dies on it: sending it again could crash the next instance too.
	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{"n":2}`)), http.StatusBadGateway)
	if got := hits.Load(); got != 2 {
		t.Fatalf("the instance got %d requests, want 2: the one it dropped was sent again", got)
	}
	if st := r.Stats("ep")["blue"]; st.Retries != 0 {
		t.Fatalf("stats = %+v, want no retry", st)
	}
}

func TestUpstream_AnIdempotentRequestTheInstanceDroppedIsSentAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  func() *http.Request
	}{
		{"GET", func() *http.Request {
			req := scoreRequest("ep", testPrimary, "")
			req.Method = http.MethodGet
			return req
		}},
		{"POST with an Idempotency-Key", func() *http.Request {
			req := scoreRequest("ep", testPrimary, `{"n":2}`)
			req.Header.Set("Idempotency-Key", "a1")
			return req
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, hits := crashingBackend(t, 2)
			r := newTestRouter(t, Options{})
			r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))

			expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{"n":1}`)), http.StatusOK)
			rec := serve(r, tc.req())
			expectStatus(t, rec, http.StatusOK)
			if rec.Body.String() != "ok" {
				t.Fatalf("body %q", rec.Body.String())
			}
			if got := hits.Load(); got != 3 {
				t.Fatalf("the instance got %d requests, want 3 (the dropped one once more)", got)
			}
		})
	}
}

func TestUpstream_ConnectionCloseFromTheInstanceIsHonoured(t *testing.T) {
	b := testbackend.NewWith(t, "blue", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "closing")
	}))
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))

	for i := 0; i < 3; i++ {
		rec := serve(r, scoreRequest("ep", testPrimary, `{}`))
		expectStatus(t, rec, http.StatusOK)
		if rec.Body.String() != "closing" || rec.Header().Get("Connection") != "" {
			t.Fatalf("got %q with Connection %q", rec.Body.String(), rec.Header().Get("Connection"))
		}
	}
	if got := b.Opened.Load(); got != 3 {
		t.Fatalf("instance saw %d connections for 3 requests answered with Connection: close, want 3", got)
	}
	if st := r.Stats("ep")["blue"]; st.Retries != 0 || st.Responses2xx != 3 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestUpstream_IdleConnectionsCloseWhenTheInstanceLeaves(t *testing.T) {
	blue, green := testbackend.New(t, "blue"), testbackend.New(t, "green")
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, blue), deployment("green", 1, green)))
	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{}`)), http.StatusOK)
	pinned := scoreRequest("ep", testPrimary, `{}`)
	pinned.Header.Set(DeploymentHeader, "green")
	expectStatus(t, serve(r, pinned), http.StatusOK)

	// green leaves the endpoint: its idle connection is closed, blue's is kept.
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, blue)))
	wait(t, green.Closed, "green's idle connection to close")
	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{}`)), http.StatusOK)
	if got := blue.Opened.Load(); got != 1 {
		t.Fatalf("blue saw %d connections, want 1 (kept across the update)", got)
	}
	// The endpoint goes: blue's connection is closed too.
	r.RemoveEndpoint("ep")
	wait(t, blue.Closed, "blue's idle connection to close")
}

// bigBody is over maxBufferedBody: such a body streams through httputil.ReverseProxy.
var bigBody = strings.Repeat("0123456789abcdef", (maxBufferedBody+4096)/16)

func TestRetry_LargeBodyStreamedToADeadInstanceGetsOneRetry(t *testing.T) {
	live := testbackend.New(t, "live")
	r := newTestRouter(t, Options{})
	d := &Deployment{Name: "blue", MaxConcurrentPerInstance: 1, Backends: []Backend{
		{ID: "dead", URL: testbackend.Dead(t), Ready: true},
		backendOf(live, "live"),
	}}
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))
	for i := 0; i < 2; i++ {
		rec := serve(r, scoreRequest("ep", testPrimary, bigBody))
		expectStatus(t, rec, http.StatusOK)
	}
	for _, s := range live.Requests() {
		if s.Body != bigBody {
			t.Fatalf("retried request lost its body: %d bytes", len(s.Body))
		}
	}
	if st := r.Stats("ep")["blue"]; st.Retries != 1 || st.Responses2xx != 2 || st.InFlight != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// recordingTransport is a caller's own transport: the real one, counting its requests.
type recordingTransport struct {
	http.RoundTripper
	calls atomic.Int64
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.calls.Add(1)
	return t.RoundTripper.RoundTrip(req)
}

func TestProxy_ACallersTransportCarriesEveryRequest(t *testing.T) {
	b := testbackend.New(t, "blue")
	tr := &recordingTransport{RoundTripper: NewTransport()}
	r := newTestRouter(t, Options{Transport: tr})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))

	req := scoreRequest("ep", testPrimary, `{"small":true}`)
	req.Header.Set(RequestIDHeader, "own-transport-1")
	rec := serve(r, req)
	expectStatus(t, rec, http.StatusOK)
	if tr.calls.Load() != 1 {
		t.Fatalf("the caller's transport carried %d requests, want 1", tr.calls.Load())
	}
	if got := rec.Header().Values(RequestIDHeader); len(got) != 1 || got[0] != "own-transport-1" || rec.Header().Get(DeploymentHeader) != "blue" {
		t.Fatalf("response headers %v", rec.Header())
	}
	s := b.Requests()
	if len(s) != 1 || s[0].Header.Get("Authorization") != "" || s[0].Body != `{"small":true}` {
		t.Fatalf("instance saw %+v", s)
	}
}

func TestTimeout_AClientStillSendingItsBodyGets504(t *testing.T) {
	b := testbackend.New(t, "blue")
	clk := newArmingClock()
	r := newTestRouter(t, Options{Clock: clk})
	d := deployment("blue", 1, b)
	d.RequestTimeout = 2 * time.Second
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))
	front := newFront(t, r)

	conn, err := net.Dial("tcp", front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	// Ten bytes announced, three sent: the router waits for the rest under the timeout.
	_, err = io.WriteString(conn, "POST "+ScoringPath("ep")+" HTTP/1.1\r\nHost: router\r\n"+
		"Authorization: Bearer "+testPrimary+"\r\nContent-Length: 10\r\n\r\nabc")
	if err != nil {
		t.Fatal(err)
	}
	// The loops hand the request off, its body incomplete; the router, on the lean
	// server, starts its timeout and waits for the rest.
	clk.awaitTimer(t, 2*time.Second, 1)
	clk.Step(2 * time.Second)

	_ = conn.SetReadDeadline(time.Now().Add(failsafe))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status = %d, want 504", res.StatusCode)
	}
	if b.Hits.Load() != 0 {
		t.Fatal("a request without its whole body reached the instance")
	}
	front.over.await(t, 1, "the request to be over")
	if st := r.Stats("ep")["blue"]; st.Timeouts != 1 || st.Responses5xx != 1 || st.InFlight != 0 {
		t.Fatalf("stats = %+v", st)
	}
}
