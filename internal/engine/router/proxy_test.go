package router

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

func TestTimeout_504AndTheUpstreamRequestIsCancelled(t *testing.T) {
	b := newHoldingBackend(t, "blue")
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	r := newTestRouter(t, Options{Clock: clk})
	d := deployment("blue", 1, b)
	d.RequestTimeout = 3 * time.Second
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))

	res := serveAsync(r, scoreRequest("ep", testPrimary, `{"slow":true}`))
	wait(t, b.entered, "the request at the backend")
	clk.Step(2999 * time.Millisecond)
	select {
	case rec := <-res:
		t.Fatalf("answered before the timeout: %d %q", rec.Code, rec.Body.String())
	default:
	}
	clk.Step(time.Millisecond)

	rec := wait(t, res, "the 504")
	expectStatus(t, rec, http.StatusGatewayTimeout)
	if e := decodeError(t, rec); e.Code != CodeTimeout {
		t.Fatalf("code = %q", e.Code)
	}
	wait(t, b.canceled, "the backend to observe its request context done")

	st := r.Stats("ep")["blue"]
	if st.Timeouts != 1 || st.Responses5xx != 1 || st.InFlight != 0 {
		t.Fatalf("stats = %+v", st)
	}
	// The slot is free again.
	b.releaseAll()
	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{}`)), http.StatusOK)
}

func TestRetry_DeadInstanceGetsOneRetryOnAnother(t *testing.T) {
	live := newBackend(t, "live")
	deadURL := deadAddress(t)
	r := newTestRouter(t, Options{})
	d := &Deployment{Name: "blue", MaxConcurrentPerInstance: 1, Backends: []Backend{
		{ID: "dead", URL: deadURL, Ready: true},
		live.backend("live"),
	}}
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))

	// Two sequential requests start round-robin at each instance once, so exactly one of
	// them tries the dead instance first.
	for i := 0; i < 2; i++ {
		rec := serve(r, scoreRequest("ep", testPrimary, `{"payload":"kept"}`))
		expectStatus(t, rec, http.StatusOK)
		if rec.Body.String() != "live" {
			t.Fatalf("body %q", rec.Body.String())
		}
	}
	for _, s := range live.requests() {
		if s.Body != `{"payload":"kept"}` {
			t.Fatalf("retried request lost its body: %q", s.Body)
		}
	}
	st := r.Stats("ep")["blue"]
	if st.Retries != 1 || st.Responses2xx != 2 || st.InFlight != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestRetry_OnlyOnceThen502(t *testing.T) {
	r := newTestRouter(t, Options{})
	d := &Deployment{Name: "blue", Backends: []Backend{
		{ID: "dead-1", URL: deadAddress(t), Ready: true},
		{ID: "dead-2", URL: deadAddress(t), Ready: true},
		{ID: "dead-3", URL: deadAddress(t), Ready: true},
	}}
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))
	rec := serve(r, scoreRequest("ep", testPrimary, `{}`))
	expectStatus(t, rec, http.StatusBadGateway)
	if e := decodeError(t, rec); e.Code != CodeBadGateway {
		t.Fatalf("code = %q", e.Code)
	}
	st := r.Stats("ep")["blue"]
	if st.Retries != 1 || st.Responses5xx != 1 || st.InFlight != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

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

func TestProxy_PathQueryHeadersAndRequestID(t *testing.T) {
	b := newBackend(t, "blue")
	r := newTestRouter(t, Options{})
	d := deployment("blue", 1, b)
	d.Backends[0].URL.Path = "/v1/" // a base path, trailing slash and all
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))

	req := scoreRequest("ep", testPrimary, `{"data":[1,2,3]}`)
	req.URL, _ = url.Parse("/ep/score/explain%2Fall?verbose=1&x=a%20b")
	req.Header.Set("Connection", "X-Hop-Custom")
	req.Header.Set("X-Hop-Custom", "drop me")
	req.Header.Set("Keep-Alive", "timeout=5")
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("X-Client-Header", "keep me")
	rec := serve(r, req)
	expectStatus(t, rec, http.StatusOK)

	seen := b.requests()
	if len(seen) != 1 {
		t.Fatalf("backend saw %d requests", len(seen))
	}
	s := seen[0]
	if s.Method != http.MethodPost || s.Path != "/v1/score/explain/all" || s.RawPath != "/v1/score/explain%2Fall" {
		t.Fatalf("backend saw %s path %q raw %q", s.Method, s.Path, s.RawPath)
	}
	if s.RawQuery != "verbose=1&x=a%20b" || s.Body != `{"data":[1,2,3]}` {
		t.Fatalf("query %q body %q", s.RawQuery, s.Body)
	}
	for _, h := range []string{"Authorization", "X-Hop-Custom", "Keep-Alive", "Proxy-Authorization"} {
		if v := s.Header.Get(h); v != "" {
			t.Fatalf("header %s forwarded: %q", h, v)
		}
	}
	if s.Header.Get("X-Client-Header") != "keep me" || s.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("end-to-end headers lost: %v", s.Header)
	}
	id := s.Header.Get(RequestIDHeader)
	if len(id) != 36 || id[14] != '4' {
		t.Fatalf("generated request id %q is not a v4 UUID", id)
	}
	if rec.Header().Get(RequestIDHeader) != id || rec.Header().Values(RequestIDHeader)[0] != id || len(rec.Header().Values(RequestIDHeader)) != 1 {
		t.Fatalf("response request ids %v, want only %q", rec.Header().Values(RequestIDHeader), id)
	}
	if rec.Header().Get(DeploymentHeader) != "blue" || rec.Header().Get("X-Backend") != "blue" {
		t.Fatalf("response headers %v", rec.Header())
	}
	if s.Header.Get("X-Forwarded-For") == "" {
		t.Fatal("X-Forwarded-For not set")
	}

	// A client's own request id is kept; a malformed one is replaced.
	req = scoreRequest("ep", testPrimary, `{}`)
	req.Header.Set(RequestIDHeader, "client-id-42")
	if rec := serve(r, req); rec.Header().Get(RequestIDHeader) != "client-id-42" {
		t.Fatalf("client request id replaced by %q", rec.Header().Get(RequestIDHeader))
	}
	req = scoreRequest("ep", testPrimary, `{}`)
	req.Header.Set(RequestIDHeader, "has spaces\tand tabs")
	if rec := serve(r, req); len(rec.Header().Get(RequestIDHeader)) != 36 {
		t.Fatalf("malformed request id kept: %q", rec.Header().Get(RequestIDHeader))
	}
	// Errors carry the request id too.
	req = scoreRequest("ep", "", `{}`)
	req.Header.Set(RequestIDHeader, "denied-1")
	if rec := serve(r, req); rec.Header().Get(RequestIDHeader) != "denied-1" {
		t.Fatal("401 without the request id")
	}
}

func TestTimeout_AfterTheHeadersAbortsTheResponse(t *testing.T) {
	started, canceled := make(chan struct{}, 1), make(chan struct{}, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		started <- struct{}{}
		<-r.Context().Done()
		canceled <- struct{}{}
	}))
	t.Cleanup(backend.Close)
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	r := newTestRouter(t, Options{Clock: clk})
	d := deployment("blue", 1, &testBackend{Server: backend})
	d.RequestTimeout = time.Second
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))
	front := newFront(t, r)

	type result struct {
		status int
		body   string
		err    error
	}
	results, gotHeaders := make(chan result, 1), make(chan struct{}, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, front.URL+ScoringPath("ep"), strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+testPrimary)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			results <- result{err: err}
			return
		}
		defer res.Body.Close()
		gotHeaders <- struct{}{}
		body, err := io.ReadAll(res.Body)
		results <- result{status: res.StatusCode, body: string(body), err: err}
	}()
	wait(t, started, "the streaming response")
	select { // the headers reached the client: the timeout now cuts the body
	case <-gotHeaders:
	case res := <-results:
		t.Fatalf("no response headers: %+v", res)
	case <-time.After(failsafe):
		t.Fatal("gave up waiting for the response headers")
	}
	clk.Step(time.Second)
	res := wait(t, results, "the aborted response")
	if res.status != http.StatusOK || res.err == nil {
		t.Fatalf("a response cut by the timeout must end in an error, got %d %q %v", res.status, res.body, res.err)
	}
	wait(t, canceled, "the backend to observe its request context done")
	st := r.Stats("ep")["blue"]
	if st.Timeouts != 1 || st.Responses2xx != 1 || st.InFlight != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestProxy_HeadersSurviveExpectContinue(t *testing.T) {
	b := newBackend(t, "blue")
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))
	front := newFront(t, r)
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: failsafe}}
	t.Cleanup(client.CloseIdleConnections)

	req, _ := http.NewRequest(http.MethodPost, front.URL+ScoringPath("ep"), strings.NewReader(strings.Repeat("x", 4096)))
	req.Header.Set("Authorization", "Bearer "+testPrimary)
	req.Header.Set("Expect", "100-continue")
	req.Header.Set(RequestIDHeader, "expect-1")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "blue" {
		t.Fatalf("got %d %q", res.StatusCode, body)
	}
	if got := res.Header.Values(RequestIDHeader); len(got) != 1 || got[0] != "expect-1" {
		t.Fatalf("X-Request-Id = %v", got)
	}
	if got := res.Header.Values(DeploymentHeader); len(got) != 1 || got[0] != "blue" {
		t.Fatalf("%s = %v", DeploymentHeader, got)
	}
	if s := b.requests(); len(s) != 1 || len(s[0].Body) != 4096 {
		t.Fatal("body did not arrive")
	}
}
