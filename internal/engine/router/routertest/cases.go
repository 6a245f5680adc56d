package routertest

import (
	"bufio"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"
)

// cases is the table Run runs, in this order. They were lifted from the router's own tests,
// which ran each on one serving path (mostly a response recorder).
var cases = []testCase{
	{"the usual request reaches its instance", usualRequest},
	{"request id kept, replaced or made", requestIDs},
	{"path, query and headers forwarded", pathQueryAndHeaders},
	{"401 for a missing or wrong credential", unauthorized},
	{"401 in token mode unless the verifier agrees", tokenMode},
	{"404 for an unknown endpoint or path", notFound},
	{"traffic split by cumulative share", trafficSplit},
	{"pin header pins even a zero-traffic deployment", pinHeader},
	{"503 when no deployment receives traffic", noTraffic},
	{"503 without a ready instance", noReadyInstance},
	{"429 when every instance is full", busy},
	{"504 after the request timeout", timeout},
	{"504 cuts a response already under way", timeoutAfterHeaders},
	{"one retry on another instance", retry},
	{"502 after one retry", retryOnlyOnce},
	{"client gone ends the instance request", clientGone},
	{"every response framing passes", responseFraming},
	{"large and chunked bodies arrive whole", bodies},
	{"Expect: 100-continue keeps the headers", expectContinue},
	{"keep-alive to the client and the instance", keepAlive},
	{"pipelined requests answered in order", pipelined},
}

// The usual request reaches its instance without the credential, with a generated request id,
// X-Forwarded-For and X-Forwarded-Proto, and comes back with the deployment header and the instance's headers.
func usualRequest(e *env) {
	b := testbackend.New(e.t, "b0")
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 4, b)))
	res := e.post(primaryKey, `{"x":1}`)
	e.expectStatus(res, http.StatusOK)
	if res.body != "b0" {
		e.t.Fatalf("body %q, want b0", res.body)
	}
	if got := res.header.Get(router.DeploymentHeader); got != "blue" {
		e.t.Errorf("%s = %q, want blue", router.DeploymentHeader, got)
	}
	id := res.header.Values(router.RequestIDHeader)
	if len(id) != 1 || len(id[0]) != 36 || id[0][14] != '4' {
		e.t.Errorf("X-Request-Id = %q, want one generated v4 UUID, not the instance's", id)
	}
	if res.header.Get("X-Backend") != "b0" || res.header.Get("Date") == "" {
		e.t.Errorf("response header %v lacks the instance's X-Backend or a Date", res.header)
	}
	seen := b.Requests()
	if len(seen) != 1 {
		e.t.Fatalf("backend got %d requests, want 1", len(seen))
	}
	got := seen[0]
	if got.Method != http.MethodPost || got.Path != "/score" || got.Body != `{"x":1}` ||
		got.Header.Get("Authorization") != "" || got.Header.Get("Content-Type") != "application/json" ||
		len(id) != 1 || got.Header.Get(router.RequestIDHeader) != id[0] ||
		got.Header.Get("X-Forwarded-For") != "127.0.0.1" || got.Header.Get("X-Forwarded-Proto") != e.proto() {
		e.t.Errorf("backend saw %+v", got)
	}
	if st := e.stats("blue"); st.Requests != 1 || st.Responses2xx != 1 || st.InFlight != 0 {
		e.t.Errorf("stats %+v, want one 2xx request and nothing in flight", st)
	}
}

// A client's request id is kept and forwarded, a malformed one replaced; errors carry it too.
func requestIDs(e *env) {
	b := testbackend.New(e.t, "blue")
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))
	withID := func(key, id string) *response {
		req := e.request(key, `{}`)
		req.Header.Set(router.RequestIDHeader, id)
		res := e.do(req)
		e.finished(1)
		return res
	}
	// A client's own request id is kept, and reaches the instance.
	if res := withID(primaryKey, "client-id-42"); res.header.Get(router.RequestIDHeader) != "client-id-42" {
		e.t.Fatalf("client request id replaced by %q", res.header.Get(router.RequestIDHeader))
	}
	if s := b.Requests(); len(s) != 1 || s[0].Header.Get(router.RequestIDHeader) != "client-id-42" {
		e.t.Fatalf("instance saw %+v", s)
	}
	// A malformed one is replaced.
	if res := withID(primaryKey, "has spaces\tand tabs"); len(res.header.Get(router.RequestIDHeader)) != 36 {
		e.t.Fatalf("malformed request id kept: %q", res.header.Get(router.RequestIDHeader))
	}
	// Errors carry the request id too.
	res := withID("", "denied-1")
	e.expectStatus(res, http.StatusUnauthorized)
	if res.header.Get(router.RequestIDHeader) != "denied-1" {
		e.t.Fatal("401 without the request id")
	}
}

// The instance gets the escaped path and query under its base path, without the hop-by-hop
// headers, those named in Connection and the credential, with every end-to-end header.
func pathQueryAndHeaders(e *env) {
	b := testbackend.New(e.t, "blue")
	d := deployment("blue", 1, b)
	d.Backends[0].URL.Path = "/v1/" // a base path, trailing slash and all
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, d))

	req := e.request(primaryKey, `{"data":[1,2,3]}`)
	req.URL, _ = url.Parse(e.url + "/ep/score/explain%2Fall?verbose=1&x=a%20b")
	req.Header.Set("Connection", "X-Hop-Custom")
	req.Header.Set("X-Hop-Custom", "drop me")
	req.Header.Set("Keep-Alive", "timeout=5")
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("X-Client-Header", "keep me")
	res := e.do(req)
	e.finished(1)
	e.expectStatus(res, http.StatusOK)
	seen := b.Requests()
	if len(seen) != 1 {
		e.t.Fatalf("backend saw %d requests", len(seen))
	}
	s := seen[0]
	if s.Method != http.MethodPost || s.Path != "/v1/score/explain/all" || s.RawPath != "/v1/score/explain%2Fall" {
		e.t.Fatalf("backend saw %s path %q raw %q", s.Method, s.Path, s.RawPath)
	}
	if s.RawQuery != "verbose=1&x=a%20b" || s.Body != `{"data":[1,2,3]}` {
		e.t.Fatalf("query %q body %q", s.RawQuery, s.Body)
	}
	for _, h := range []string{"Authorization", "X-Hop-Custom", "Keep-Alive", "Proxy-Authorization"} {
		if v := s.Header.Get(h); v != "" {
			e.t.Fatalf("header %s forwarded: %q", h, v)
		}
	}
	// An escaped path is not the lean server's to serve: X-Forwarded-Proto says that
	// net/http, too, knew the connection was TLS.
	if s.Header.Get("X-Client-Header") != "keep me" || s.Header.Get("Content-Type") != "application/json" ||
		s.Header.Get("X-Forwarded-For") == "" || s.Header.Get("X-Forwarded-Proto") != e.proto() {
		e.t.Fatalf("end-to-end headers lost: %v", s.Header)
	}

	// The plain score path, with and without a query, under the base path.
	for _, target := range []string{"/ep/score", "/ep/score?", "/ep/score?x=1", "/ep/score/a!b"} {
		req := e.request(primaryKey, `{}`)
		req.URL, _ = url.Parse(e.url + target)
		e.expectStatus(e.do(req), http.StatusOK)
		e.finished(1)
	}
	seen = b.Requests()[1:]
	want := []struct{ path, query string }{{"/v1/score", ""}, {"/v1/score", ""}, {"/v1/score", "x=1"}, {"/v1/score/a!b", ""}}
	if len(seen) != len(want) {
		e.t.Fatalf("instance saw %d requests, want %d", len(seen), len(want))
	}
	for i, w := range want {
		if seen[i].Path != w.path || seen[i].RawQuery != w.query {
			e.t.Fatalf("request %d: instance saw path %q query %q, want %q %q", i, seen[i].Path, seen[i].RawQuery, w.path, w.query)
		}
	}
}

// A missing or wrong credential is a 401 with WWW-Authenticate, even for a pinned request,
// and never reaches an instance; either key works, and the scheme is case-insensitive.
func unauthorized(e *env) {
	b := testbackend.New(e.t, "blue")
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 4, b)))
	for _, header := range []string{
		"",                    // missing
		"Bearer not-the-key",  // wrong key
		"Bearer ",             // empty bearer
		primaryKey,            // no scheme
		"Basic " + primaryKey, // another scheme
		"Bearer " + primaryKey[:len(primaryKey)-1], // a prefix of the key
		"Bearer " + primaryKey + "x",               // the key and more
	} {
		req := e.request("", `{"x":1}`)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		// Even a pinned request must not get through.
		req.Header.Set(router.DeploymentHeader, "blue")
		r := e.do(req)
		e.finished(1)
		e.expectError(r, http.StatusUnauthorized, router.CodeUnauthorized)
		if r.header.Get("WWW-Authenticate") == "" {
			e.t.Fatalf("Authorization %q: 401 without WWW-Authenticate", header)
		}
		if strings.Contains(r.body, primaryKey) {
			e.t.Fatal("the error body echoes a key")
		}
	}
	if n := b.Hits.Load(); n != 0 {
		e.t.Fatalf("backend got %d requests from unauthenticated callers", n)
	}
	for _, key := range []string{primaryKey, secondaryKey} {
		e.expectStatus(e.post(key, `{"x":1}`), http.StatusOK)
	}
	// The scheme is case-insensitive (RFC 9110 section 11.1).
	req := e.request("", `{}`)
	req.Header.Set("Authorization", "bearer "+secondaryKey)
	e.expectStatus(e.do(req), http.StatusOK)
	e.finished(1)
	if n := b.Hits.Load(); n != 3 {
		e.t.Fatalf("backend got %d requests, want 3", n)
	}
}

// In token mode only the verifier's tokens pass (keys do not), a missing verifier fails closed,
// and an endpoint with empty keys rejects everything.
func tokenMode(e *env) {
	b := testbackend.New(e.t, "blue")
	ep := keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b))
	ep.AuthMode = router.AuthModeAMLToken
	ep.TokenVerifier = func(tok string) bool { return tok == "aml-token-1" }
	noKeys := keyEndpoint("nokeys", map[string]int{"blue": 100}, deployment("blue", 1, b))
	noKeys.Keys = [2]string{"", ""}
	e.start(router.Options{}, ep, noKeys)

	for _, key := range []string{primaryKey, "aml-token-2", ""} { // keys do not work in token mode
		e.expectError(e.post(key, `{}`), http.StatusUnauthorized, router.CodeUnauthorized)
	}
	req := e.request("anything", `{}`)
	req.URL.Path = router.ScoringPath("nokeys")
	e.expectError(e.do(req), http.StatusUnauthorized, router.CodeUnauthorized)
	e.finished(1)
	if b.Hits.Load() != 0 {
		e.t.Fatal("backend reached without a valid token")
	}
	e.expectStatus(e.post("aml-token-1", `{}`), http.StatusOK)

	ep.TokenVerifier = nil // fails closed
	e.r.SetEndpoint(ep)
	e.expectError(e.post("aml-token-1", `{}`), http.StatusUnauthorized, router.CodeUnauthorized)
}

// A path that is not /{endpoint}/score[/...] or names an unknown (or removed) endpoint is a 404.
func notFound(e *env) {
	b := testbackend.New(e.t, "blue")
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))
	for _, path := range []string{"/", "/ep", "/ep/", "/ep/scores", "/ep/predict", "/other/score", "//score"} {
		req := e.request(primaryKey, `{}`)
		req.URL.Path = path
		res := e.do(req)
		e.finished(1)
		e.expectError(res, http.StatusNotFound, router.CodeNotFound)
	}
	e.r.RemoveEndpoint("ep")
	e.expectError(e.post(primaryKey, `{}`), http.StatusNotFound, router.CodeNotFound)
	if b.Hits.Load() != 0 {
		e.t.Fatal("backend reached")
	}
	if e.r.Stats("ep") != nil {
		e.t.Fatal("stats of a removed endpoint")
	}
}

// Deployments, in name order, cover cumulative shares of Rand's draw.
func trafficSplit(e *env) {
	blue, green := testbackend.New(e.t, "blue"), testbackend.New(e.t, "green")
	// Deployments are laid out in name order: blue covers [0, 0.8), green [0.8, 1).
	draws := []float64{0, 0.5, 0.7999, 0.8, 0.95, 0.9999, 0.1}
	want := []string{"blue", "blue", "blue", "green", "green", "green", "blue"}
	e.start(router.Options{Rand: sequence(e.t, draws...)}, keyEndpoint("ep", map[string]int{"blue": 80, "green": 20},
		deployment("blue", 1, blue), deployment("green", 1, green)))
	for i, w := range want {
		res := e.post(primaryKey, `{}`)
		e.expectStatus(res, http.StatusOK)
		if got := res.header.Get(router.DeploymentHeader); got != w || res.body != w {
			e.t.Fatalf("draw %v: served by %q (body %q), want %q", draws[i], got, res.body, w)
		}
	}
	if b, g := e.stats("blue"), e.stats("green"); b.Requests != 4 || g.Requests != 3 || b.Responses2xx != 4 {
		e.t.Fatalf("stats = %+v, %+v", b, g)
	}
}

// The pin header reaches even a zero-traffic deployment without a draw; an unknown one is a
// 404 listing the endpoint's deployments.
func pinHeader(e *env) {
	blue, green := testbackend.New(e.t, "blue"), testbackend.New(e.t, "green")
	e.start(router.Options{Rand: sequence(e.t)}, // pinned requests never draw
		keyEndpoint("ep", map[string]int{"blue": 100, "green": 0}, deployment("blue", 1, blue), deployment("green", 1, green)))
	pinned := func(dep string) *response {
		req := e.request(primaryKey, `{}`)
		req.Header.Set(router.DeploymentHeader, dep)
		res := e.do(req)
		e.finished(1)
		return res
	}
	res := pinned("green")
	e.expectStatus(res, http.StatusOK)
	if res.header.Get(router.DeploymentHeader) != "green" || res.body != "green" {
		e.t.Fatalf("pinned to green, served by %q (%q)", res.header.Get(router.DeploymentHeader), res.body)
	}
	er := e.expectError(pinned("purple"), http.StatusNotFound, router.CodeNotFound)
	if !strings.Contains(er.Message, "purple") || !strings.Contains(er.Message, "blue, green") || len(er.Deployments) != 2 {
		e.t.Fatalf("unknown deployment error = %+v", er)
	}
	if blue.Hits.Load() != 0 {
		e.t.Fatal("blue reached by pinned requests")
	}
}

// Without a pin, an endpoint whose deployments all have zero traffic is a 503.
func noTraffic(e *env) {
	blue := testbackend.New(e.t, "blue")
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 0}, deployment("blue", 1, blue)))
	er := e.expectError(e.post(primaryKey, `{}`), http.StatusServiceUnavailable, router.CodeUnavailable)
	if !strings.Contains(er.Message, "no deployment receives traffic") {
		e.t.Fatalf("error = %+v", er)
	}
	req := e.request(primaryKey, `{}`)
	req.Header.Set(router.DeploymentHeader, "blue")
	e.expectStatus(e.do(req), http.StatusOK)
	e.finished(1)
}

// Instances not ready get nothing; a deployment with none ready is a 503 naming it.
func noReadyInstance(e *env) {
	a, b := testbackend.New(e.t, "a"), testbackend.New(e.t, "b")
	d := deployment("blue", 1, a, b)
	d.Backends[0].Ready = false
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, d))
	for i := 0; i < 4; i++ {
		e.expectStatus(e.post(primaryKey, `{}`), http.StatusOK)
	}
	if a.Hits.Load() != 0 || b.Hits.Load() != 4 {
		e.t.Fatalf("hits a=%d b=%d; the not-ready instance must get none", a.Hits.Load(), b.Hits.Load())
	}
	d.Backends[1].Ready = false
	e.r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))
	res := e.post(primaryKey, `{}`)
	er := e.expectError(res, http.StatusServiceUnavailable, router.CodeUnavailable)
	if !strings.Contains(er.Message, "no ready instance") {
		e.t.Fatalf("error = %+v", er)
	}
	if got := res.header.Get(router.DeploymentHeader); got != "blue" {
		e.t.Fatalf("503 names deployment %q", got)
	}
}

// Every instance at its limit is a 429 that reaches no instance, also after the endpoint is
// replaced; the slot, once released, serves again.
func busy(e *env) {
	b := testbackend.NewHolding(e.t, "blue")
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))
	first := e.doAsync(e.request(primaryKey, `{"n":1}`))
	wait(e.t, b.Entered, "the first request at the backend")

	res := e.post(primaryKey, `{"n":2}`)
	e.expectError(res, http.StatusTooManyRequests, router.CodeTooManyRequests)
	if res.header.Get(router.DeploymentHeader) != "blue" {
		e.t.Fatal("429 does not name the deployment")
	}
	// Replacing the endpoint keeps the in-flight count: still full.
	e.r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))
	e.expectError(e.post(primaryKey, `{"n":3}`), http.StatusTooManyRequests, router.CodeTooManyRequests)
	if n := b.Hits.Load(); n != 1 {
		e.t.Fatalf("backend got %d requests; rejected ones must not reach it", n)
	}
	b.ReleaseAll()
	e.expectStatus(wait(e.t, first, "the first response"), http.StatusOK)
	e.finished(1)
	e.expectStatus(e.post(primaryKey, `{"n":4}`), http.StatusOK)
	st := e.stats("blue")
	if st.Requests != 4 || st.Rejected429 != 2 || st.Responses4xx != 2 || st.Responses2xx != 2 || st.InFlight != 0 {
		e.t.Fatalf("stats = %+v", st)
	}
}

// The request timeout (on the router's clock) is a 504 that ends the instance's request and
// frees its slot.
func timeout(e *env) {
	b := testbackend.NewHolding(e.t, "blue")
	d := deployment("blue", 1, b)
	d.RequestTimeout = 3 * time.Second
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, d))

	res := e.doAsync(e.request(primaryKey, `{"slow":true}`))
	wait(e.t, b.Entered, "the request at the backend")
	e.clk.Step(2999 * time.Millisecond)
	select {
	case r := <-res:
		e.t.Fatalf("answered before the timeout: %d %q", r.status, r.body)
	default:
	}
	e.clk.Step(time.Millisecond)
	e.expectError(wait(e.t, res, "the 504"), http.StatusGatewayTimeout, router.CodeTimeout)
	wait(e.t, b.Canceled, "the backend to see its request end")
	e.finished(1)
	if st := e.stats("blue"); st.Timeouts != 1 || st.Responses5xx != 1 || st.InFlight != 0 {
		e.t.Fatalf("stats = %+v", st)
	}
	// The slot is free again.
	b.ReleaseAll()
	e.expectStatus(e.post(primaryKey, `{}`), http.StatusOK)
}

// A timeout after the response headers went out cuts the response.
func timeoutAfterHeaders(e *env) {
	started, canceled := make(chan struct{}, 1), make(chan struct{}, 1)
	b := testbackend.NewWith(e.t, "blue", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		started <- struct{}{}
		<-r.Context().Done()
		canceled <- struct{}{}
	}))
	d := deployment("blue", 1, b)
	d.RequestTimeout = time.Second
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, d))

	type result struct {
		status int
		body   string
		err    error
	}
	results, gotHeaders := make(chan result, 1), make(chan struct{}, 1)
	go func() {
		res, err := e.client.Do(e.request(primaryKey, `{}`))
		if err != nil {
			results <- result{err: err}
			return
		}
		defer res.Body.Close()
		gotHeaders <- struct{}{}
		body, err := io.ReadAll(res.Body)
		results <- result{status: res.StatusCode, body: string(body), err: err}
	}()
	wait(e.t, started, "the streaming response")
	select { // the headers reached the client: the timeout now cuts the body
	case <-gotHeaders:
	case res := <-results:
		e.t.Fatalf("no response headers: %+v", res)
	case <-time.After(failsafe):
		e.t.Fatal("gave up waiting for the response headers")
	}
	e.clk.Step(time.Second)
	res := wait(e.t, results, "the aborted response")
	if res.status != http.StatusOK || res.err == nil {
		e.t.Fatalf("a response cut by the timeout must end in an error, got %d %q %v", res.status, res.body, res.err)
	}
	wait(e.t, canceled, "the backend to see its request end")
	e.finished(1)
	if st := e.stats("blue"); st.Timeouts != 1 || st.Responses2xx != 1 || st.InFlight != 0 {
		e.t.Fatalf("stats = %+v", st)
	}
}

// An instance that cannot be connected to gets the request moved, body and all, to another.
func retry(e *env) {
	live := testbackend.New(e.t, "live")
	d := &router.Deployment{Name: "blue", MaxConcurrentPerInstance: 1, RequestTimeout: time.Minute, Backends: []router.Backend{
		{ID: "dead", URL: testbackend.Dead(e.t), Ready: true},
		instance(live, "live"),
	}}
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, d))
	// Two sequential requests start round-robin at each instance once, so exactly one of
	// them tries the dead instance first.
	for i := 0; i < 2; i++ {
		res := e.post(primaryKey, `{"payload":"kept"}`)
		e.expectStatus(res, http.StatusOK)
		if res.body != "live" {
			e.t.Fatalf("body %q, want live", res.body)
		}
	}
	for _, s := range live.Requests() {
		if s.Body != `{"payload":"kept"}` {
			e.t.Fatalf("retried request lost its body: %q", s.Body)
		}
	}
	if st := e.stats("blue"); st.Retries != 1 || st.Responses2xx != 2 || st.InFlight != 0 {
		e.t.Fatalf("stats = %+v", st)
	}
}

// A request is moved once: when the second instance cannot be reached either, it is a 502.
func retryOnlyOnce(e *env) {
	d := &router.Deployment{Name: "blue", RequestTimeout: time.Minute, Backends: []router.Backend{
		{ID: "dead-1", URL: testbackend.Dead(e.t), Ready: true},
		{ID: "dead-2", URL: testbackend.Dead(e.t), Ready: true},
		{ID: "dead-3", URL: testbackend.Dead(e.t), Ready: true},
	}}
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, d))
	e.expectError(e.post(primaryKey, `{}`), http.StatusBadGateway, router.CodeBadGateway)
	if st := e.stats("blue"); st.Retries != 1 || st.Responses5xx != 1 || st.InFlight != 0 {
		e.t.Fatalf("stats = %+v", st)
	}
}

// A client that goes away ends its instance request and frees the slot.
func clientGone(e *env) {
	b := testbackend.NewHolding(e.t, "b0")
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))
	c := e.dial()
	_, _ = io.WriteString(c, rawScoreRequest(""))
	wait(e.t, b.Entered, "the request at the instance")
	_ = c.Close()
	wait(e.t, b.Canceled, "the instance to see its request end")
	e.finished(1)
	if st := e.stats("blue"); st.ClientCanceled != 1 || st.InFlight != 0 {
		e.t.Fatalf("stats %+v, want one canceled request and its slot free", st)
	}
}

// Content-Length, chunked with a trailer, until-close and a 1xx before the answer all come
// through, twice each (on a kept connection, or a new one).
func responseFraming(e *env) {
	framings := []struct {
		name, response string
		closeAfter     bool
		body, trailer  string
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello", false, "hello", ""},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3;ext=1\r\nhel\r\n2\r\nlo\r\n0\r\nX-Sum: 5\r\n\r\n", false, "hello", "5"},
		{"until close", "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello", true, "hello", ""},
		{"interim first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello", false, "hello", ""},
	}
	deps := map[string]*router.Deployment{}
	for _, f := range framings {
		deps[f.name] = &router.Deployment{Name: f.name, RequestTimeout: time.Minute, Backends: []router.Backend{
			{ID: "raw", URL: &url.URL{Scheme: "http", Host: testbackend.Fixed(e.t, []byte(f.response), f.closeAfter)}, Ready: true}}}
	}
	e.start(router.Options{}, router.Endpoint{Name: "ep", AuthMode: router.AuthModeKey, Keys: [2]string{primaryKey},
		Traffic: map[string]int{}, Deployments: deps})
	for _, f := range framings {
		for i := 0; i < 2; i++ { // the second request takes the kept connection, or a new one
			req := e.request(primaryKey, `{}`)
			req.Header.Set(router.DeploymentHeader, f.name)
			res := e.do(req)
			e.finished(1)
			if res.err != nil || res.body != f.body {
				e.t.Fatalf("%s, request %d: body %q (%v), want %q", f.name, i, res.body, res.err, f.body)
			}
			if res.trailer.Get("X-Sum") != f.trailer {
				e.t.Errorf("%s: trailer X-Sum = %q, want %q", f.name, res.trailer.Get("X-Sum"), f.trailer)
			}
		}
	}
}

// Large, chunked and exactly-at-the-buffer bodies arrive whole, with the headers.
func bodies(e *env) {
	b := testbackend.New(e.t, "blue")
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))
	// Over the body the router buffers (64 KiB): such a body streams.
	big := strings.Repeat("0123456789abcdef", (256<<10)/16)
	for _, c := range []struct {
		name, body string
		chunked    bool
	}{
		{"large", big, false},
		{"large chunked", big, true},
		{"small chunked", `{"x":1}`, true},
		{"exactly the buffered maximum, chunked", big[:64<<10], true},
	} {
		req := e.request(primaryKey, c.body)
		req.Header.Set(router.RequestIDHeader, "big-1")
		req.Header.Set("X-Client-Header", "keep me")
		if c.chunked {
			req.Body = io.NopCloser(io.MultiReader(strings.NewReader(c.body[:len(c.body)/2]), strings.NewReader(c.body[len(c.body)/2:])))
			req.ContentLength = -1
		}
		before := len(b.Requests())
		res := e.do(req)
		e.finished(1)
		e.expectStatus(res, http.StatusOK)
		if res.header.Get(router.RequestIDHeader) != "big-1" || res.header.Get(router.DeploymentHeader) != "blue" {
			e.t.Fatalf("%s: response headers %v", c.name, res.header)
		}
		seen := b.Requests()
		if len(seen) != before+1 {
			e.t.Fatalf("%s: instance saw %d requests", c.name, len(seen)-before)
		}
		s := seen[len(seen)-1]
		if s.Body != c.body {
			e.t.Fatalf("%s: instance got %d bytes, want %d", c.name, len(s.Body), len(c.body))
		}
		if s.Header.Get("Authorization") != "" || s.Header.Get(router.RequestIDHeader) != "big-1" ||
			s.Header.Get("X-Client-Header") != "keep me" || s.Header.Get("X-Forwarded-For") == "" {
			e.t.Fatalf("%s: instance got headers %v", c.name, s.Header)
		}
	}
}

// A client sending Expect: 100-continue gets the router's headers once each.
func expectContinue(e *env) {
	b := testbackend.New(e.t, "blue")
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))
	req := e.request(primaryKey, strings.Repeat("x", 4096))
	req.Header.Set("Expect", "100-continue")
	req.Header.Set(router.RequestIDHeader, "expect-1")
	res := e.do(req)
	e.finished(1)
	e.expectStatus(res, http.StatusOK)
	if res.body != "blue" {
		e.t.Fatalf("body %q", res.body)
	}
	if got := res.header.Values(router.RequestIDHeader); len(got) != 1 || got[0] != "expect-1" {
		e.t.Fatalf("X-Request-Id = %v", got)
	}
	if got := res.header.Values(router.DeploymentHeader); len(got) != 1 || got[0] != "blue" {
		e.t.Fatalf("%s = %v", router.DeploymentHeader, got)
	}
	if s := b.Requests(); len(s) != 1 || len(s[0].Body) != 4096 {
		e.t.Fatal("body did not arrive")
	}
}

// Sequential requests take one client connection and one instance connection.
func keepAlive(e *env) {
	b := testbackend.New(e.t, "blue")
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 4, b)))
	const n = 20
	for i := 0; i < n; i++ {
		res := e.post(primaryKey, `{"i":1}`)
		e.expectStatus(res, http.StatusOK)
	}
	if got := e.accepted.Load(); got != 1 {
		e.t.Fatalf("the client needed %d connections for %d sequential requests, want 1", got, n)
	}
	if got := b.Opened.Load(); got != 1 {
		e.t.Fatalf("the router opened %d connections to the instance for %d sequential requests, want 1", got, n)
	}
	if got := b.Hits.Load(); got != n {
		e.t.Fatalf("instance got %d requests, want %d", got, n)
	}
}

// Pipelined requests are answered in order.
func pipelined(e *env) {
	b := testbackend.New(e.t, "b0")
	e.start(router.Options{}, keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 4, b)))
	c := e.dial()
	_, _ = io.WriteString(c, rawScoreRequest("X-Request-Id: r1\r\n")+rawScoreRequest("X-Request-Id: r2\r\n"))
	br := bufio.NewReader(c)
	for _, want := range []string{"r1", "r2"} {
		res := e.readResponse(br)
		if res.status != http.StatusOK || res.body != "b0" || res.header.Get(router.RequestIDHeader) != want {
			e.t.Fatalf("response %s: status %d, body %q, id %q", want, res.status, res.body, res.header.Get(router.RequestIDHeader))
		}
	}
	e.finished(2)
}
