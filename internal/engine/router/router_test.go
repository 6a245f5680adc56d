package router

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestScoringPath(t *testing.T) {
	if got := ScoringPath("my-endpoint"); got != "/my-endpoint/score" {
		t.Fatalf("ScoringPath = %q", got)
	}
}

func TestAuth_MissingOrWrongCredentialIs401AndNeverReachesABackend(t *testing.T) {
	b := newBackend(t, "blue")
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 4, b)))

	for name, header := range map[string]string{
		"missing":         "",
		"wrong key":       "Bearer not-the-key",
		"empty bearer":    "Bearer ",
		"no scheme":       testPrimary,
		"basic scheme":    "Basic " + testPrimary,
		"key prefix":      "Bearer " + testPrimary[:len(testPrimary)-1],
		"key with suffix": "Bearer " + testPrimary + "x",
	} {
		t.Run(name, func(t *testing.T) {
			req := scoreRequest("ep", "", `{"x":1}`)
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			// Even a pinned request must not get through.
			req.Header.Set(DeploymentHeader, "blue")
			rec := serve(r, req)
			expectStatus(t, rec, http.StatusUnauthorized)
			if e := decodeError(t, rec); e.Code != CodeUnauthorized {
				t.Fatalf("code = %q, want %q", e.Code, CodeUnauthorized)
			}
			if rec.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
			if strings.Contains(rec.Body.String(), testPrimary) {
				t.Fatal("the error body echoes a key")
			}
		})
	}
	if n := b.hits.Load(); n != 0 {
		t.Fatalf("backend got %d requests from unauthenticated callers", n)
	}

	for _, key := range []string{testPrimary, testSecondary} {
		rec := serve(r, scoreRequest("ep", key, `{"x":1}`))
		expectStatus(t, rec, http.StatusOK)
	}
	// The scheme is case-insensitive (RFC 9110 section 11.1).
	req := scoreRequest("ep", "", `{}`)
	req.Header.Set("Authorization", "bearer "+testSecondary)
	expectStatus(t, serve(r, req), http.StatusOK)
	if n := b.hits.Load(); n != 3 {
		t.Fatalf("backend got %d requests, want 3", n)
	}
}

func TestAuth_EmptyKeysRejectEverything(t *testing.T) {
	b := newBackend(t, "blue")
	r := newTestRouter(t, Options{})
	e := keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b))
	e.Keys = [2]string{"", ""}
	r.SetEndpoint(e)
	req := scoreRequest("ep", "", `{}`)
	req.Header.Set("Authorization", "Bearer  ")
	expectStatus(t, serve(r, req), http.StatusUnauthorized)
	expectStatus(t, serve(r, scoreRequest("ep", "anything", `{}`)), http.StatusUnauthorized)
	if b.hits.Load() != 0 {
		t.Fatal("backend reached")
	}
}

func TestAuth_AMLTokenModeUsesTheVerifier(t *testing.T) {
	b := newBackend(t, "blue")
	r := newTestRouter(t, Options{})
	e := keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b))
	e.AuthMode = AuthModeAMLToken
	e.TokenVerifier = func(tok string) bool { return tok == "aml-token-1" }
	r.SetEndpoint(e)

	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{}`)), http.StatusUnauthorized) // keys do not work in token mode
	expectStatus(t, serve(r, scoreRequest("ep", "aml-token-2", `{}`)), http.StatusUnauthorized)
	expectStatus(t, serve(r, scoreRequest("ep", "", `{}`)), http.StatusUnauthorized)
	if b.hits.Load() != 0 {
		t.Fatal("backend reached without a valid token")
	}
	expectStatus(t, serve(r, scoreRequest("ep", "aml-token-1", `{}`)), http.StatusOK)

	e.TokenVerifier = nil // fails closed
	r.SetEndpoint(e)
	expectStatus(t, serve(r, scoreRequest("ep", "aml-token-1", `{}`)), http.StatusUnauthorized)
}

func TestRouting_UnknownEndpointOrPathIs404(t *testing.T) {
	b := newBackend(t, "blue")
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))

	for _, path := range []string{"/", "/ep", "/ep/", "/ep/scores", "/ep/predict", "/other/score", "//score"} {
		req := scoreRequest("ep", testPrimary, `{}`)
		req.URL.Path = path
		rec := serve(r, req)
		expectStatus(t, rec, http.StatusNotFound)
		if e := decodeError(t, rec); e.Code != CodeNotFound {
			t.Fatalf("%s: code %q", path, e.Code)
		}
	}
	r.RemoveEndpoint("ep")
	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{}`)), http.StatusNotFound)
	if b.hits.Load() != 0 {
		t.Fatal("backend reached")
	}
	if r.Stats("ep") != nil {
		t.Fatal("stats of a removed endpoint")
	}
}

func TestTraffic_DeterministicRandPicksByCumulativeShare(t *testing.T) {
	blue, green := newBackend(t, "blue"), newBackend(t, "green")
	// Deployments are laid out in name order: blue covers [0, 0.8), green [0.8, 1).
	draws := []float64{0, 0.5, 0.7999, 0.8, 0.95, 0.9999, 0.1}
	want := []string{"blue", "blue", "blue", "green", "green", "green", "blue"}
	r := newTestRouter(t, Options{Rand: sequence(t, draws...)})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 80, "green": 20},
		deployment("blue", 1, blue), deployment("green", 1, green)))

	for i, w := range want {
		rec := serve(r, scoreRequest("ep", testPrimary, `{}`))
		expectStatus(t, rec, http.StatusOK)
		if got := rec.Header().Get(DeploymentHeader); got != w {
			t.Fatalf("draw %v: served by %q, want %q", draws[i], got, w)
		}
		if rec.Body.String() != w {
			t.Fatalf("draw %v: body %q from the wrong backend", draws[i], rec.Body.String())
		}
	}
	st := r.Stats("ep")
	if st["blue"].Requests != 4 || st["green"].Requests != 3 || st["blue"].Responses2xx != 4 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestTraffic_SeededSplitIsWithinBinomialTolerance(t *testing.T) {
	blue, green := newBackend(t, "blue"), newBackend(t, "green")
	src := rand.New(rand.NewPCG(20240601, 7))
	var mu sync.Mutex
	r := newTestRouter(t, Options{Rand: func() float64 { mu.Lock(); defer mu.Unlock(); return src.Float64() }})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 80, "green": 20},
		deployment("blue", 1, blue), deployment("green", 1, green)))

	const n, p = 1000, 0.8
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		rec := serve(r, scoreRequest("ep", testPrimary, `{}`))
		expectStatus(t, rec, http.StatusOK)
		counts[rec.Header().Get(DeploymentHeader)]++
	}
	sigma := math.Sqrt(n * p * (1 - p))
	if d := math.Abs(float64(counts["blue"]) - n*p); d > 4.5*sigma {
		t.Fatalf("blue got %d of %d, more than 4.5 sigma (%.1f) from %v", counts["blue"], n, sigma, n*p)
	}
	if counts["blue"]+counts["green"] != n {
		t.Fatalf("counts = %v", counts)
	}
	if int(blue.hits.Load()) != counts["blue"] || int(green.hits.Load()) != counts["green"] {
		t.Fatalf("backend hits %d/%d disagree with response headers %v", blue.hits.Load(), green.hits.Load(), counts)
	}
}

func TestPinning_HeaderPinsEvenAZeroTrafficDeployment(t *testing.T) {
	blue, green := newBackend(t, "blue"), newBackend(t, "green")
	r := newTestRouter(t, Options{Rand: sequence(t)}) // pinned requests never draw
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100, "green": 0},
		deployment("blue", 1, blue), deployment("green", 1, green)))

	req := scoreRequest("ep", testPrimary, `{}`)
	req.Header.Set(DeploymentHeader, "green")
	rec := serve(r, req)
	expectStatus(t, rec, http.StatusOK)
	if rec.Header().Get(DeploymentHeader) != "green" || rec.Body.String() != "green" {
		t.Fatalf("pinned to green, served by %q (%q)", rec.Header().Get(DeploymentHeader), rec.Body.String())
	}

	req = scoreRequest("ep", testPrimary, `{}`)
	req.Header.Set(DeploymentHeader, "purple")
	rec = serve(r, req)
	expectStatus(t, rec, http.StatusNotFound)
	e := decodeError(t, rec)
	if e.Code != CodeNotFound || !strings.Contains(e.Message, "purple") ||
		!strings.Contains(e.Message, "blue, green") || len(e.Deployments) != 2 {
		t.Fatalf("unknown deployment error = %+v", e)
	}
	if blue.hits.Load() != 0 {
		t.Fatal("blue reached by pinned requests")
	}
}

func TestTraffic_AllZeroWithoutPinIs503(t *testing.T) {
	blue := newBackend(t, "blue")
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 0}, deployment("blue", 1, blue)))

	rec := serve(r, scoreRequest("ep", testPrimary, `{}`))
	expectStatus(t, rec, http.StatusServiceUnavailable)
	if e := decodeError(t, rec); e.Code != CodeUnavailable || !strings.Contains(e.Message, "no deployment receives traffic") {
		t.Fatalf("error = %+v", e)
	}
	req := scoreRequest("ep", testPrimary, `{}`)
	req.Header.Set(DeploymentHeader, "blue")
	expectStatus(t, serve(r, req), http.StatusOK)
}

func TestInstances_NoReadyInstanceIs503AndNotReadyOnesAreSkipped(t *testing.T) {
	a, b := newBackend(t, "a"), newBackend(t, "b")
	r := newTestRouter(t, Options{})
	d := deployment("blue", 1, a, b)
	d.Backends[0].Ready = false
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))
	for i := 0; i < 4; i++ {
		expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{}`)), http.StatusOK)
	}
	if a.hits.Load() != 0 || b.hits.Load() != 4 {
		t.Fatalf("hits a=%d b=%d; the not-ready instance must get none", a.hits.Load(), b.hits.Load())
	}

	d.Backends[1].Ready = false
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))
	rec := serve(r, scoreRequest("ep", testPrimary, `{}`))
	expectStatus(t, rec, http.StatusServiceUnavailable)
	if e := decodeError(t, rec); e.Code != CodeUnavailable || !strings.Contains(e.Message, "no ready instance") {
		t.Fatalf("error = %+v", e)
	}
	if got := rec.Header().Get(DeploymentHeader); got != "blue" {
		t.Fatalf("503 names deployment %q", got)
	}
}

func TestInstances_RoundRobinOnTiesAndLeastLoadedFirst(t *testing.T) {
	bs := []*testBackend{newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")}
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 2, bs...)))
	// Sequential requests always find every instance idle: a tie, so round-robin.
	for i := 0; i < 9; i++ {
		expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{}`)), http.StatusOK)
	}
	for _, b := range bs {
		if b.hits.Load() != 3 {
			t.Fatalf("instance %s got %d of 9 sequential requests, want 3", b.name, b.hits.Load())
		}
	}

	// With one request held on each of two instances, the idle one gets the next requests.
	held := newHoldingBackend(t, "held")
	idle := newBackend(t, "idle")
	r.SetEndpoint(keyEndpoint("ep2", map[string]int{"d": 100}, deployment("d", 2, held, held, idle)))
	// Instances 0 and 1 share a URL, so they are two instances of one server.
	h1 := serveAsync(r, scoreRequest("ep2", testPrimary, `{}`))
	wait(t, held.entered, "first held request")
	h2 := serveAsync(r, scoreRequest("ep2", testPrimary, `{}`))
	wait(t, held.entered, "second held request")
	for i := 0; i < 3; i++ {
		rec := serve(r, scoreRequest("ep2", testPrimary, `{}`))
		expectStatus(t, rec, http.StatusOK)
		if rec.Body.String() != "idle" {
			t.Fatalf("request %d went to %q while the idle instance was free", i, rec.Body.String())
		}
	}
	if st := r.Stats("ep2")["d"]; st.InFlight != 2 {
		t.Fatalf("InFlight = %d, want 2", st.InFlight)
	}
	held.releaseAll()
	expectStatus(t, wait(t, h1, "held response 1"), http.StatusOK)
	expectStatus(t, wait(t, h2, "held response 2"), http.StatusOK)
}

func TestConcurrency_429WhenEveryInstanceIsFullThenOKAfterRelease(t *testing.T) {
	b := newHoldingBackend(t, "blue")
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))

	first := serveAsync(r, scoreRequest("ep", testPrimary, `{"n":1}`))
	wait(t, b.entered, "the first request at the backend")

	rec := serve(r, scoreRequest("ep", testPrimary, `{"n":2}`))
	expectStatus(t, rec, http.StatusTooManyRequests)
	if e := decodeError(t, rec); e.Code != CodeTooManyRequests {
		t.Fatalf("code = %q", e.Code)
	}
	if rec.Header().Get(DeploymentHeader) != "blue" {
		t.Fatal("429 does not name the deployment")
	}
	// Replacing the endpoint keeps the in-flight count: still full.
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))
	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{"n":3}`)), http.StatusTooManyRequests)
	if n := b.hits.Load(); n != 1 {
		t.Fatalf("backend got %d requests; rejected ones must not reach it", n)
	}

	b.releaseAll()
	expectStatus(t, wait(t, first, "the first response"), http.StatusOK)
	rec = serve(r, scoreRequest("ep", testPrimary, `{"n":4}`))
	expectStatus(t, rec, http.StatusOK)

	st := r.Stats("ep")["blue"]
	if st.Requests != 4 || st.Rejected429 != 2 || st.Responses4xx != 2 || st.Responses2xx != 2 || st.InFlight != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// deadAddress is the URL of a loopback port that was just closed.

func TestSetEndpoint_WhileRequestsAreInFlight(t *testing.T) {
	blue, green, extra := newBackend(t, "blue"), newBackend(t, "green"), newBackend(t, "extra")
	r := newTestRouter(t, Options{})
	configs := []Endpoint{
		keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 64, blue), deployment("green", 64, green)),
		keyEndpoint("ep", map[string]int{"blue": 50, "green": 50}, deployment("blue", 64, blue, extra), deployment("green", 64, green)),
		keyEndpoint("ep", map[string]int{"green": 100}, deployment("blue", 64, blue), deployment("green", 64, green, extra)),
	}
	r.SetEndpoint(configs[0])

	const workers, perWorker = 4, 40
	var wg sync.WaitGroup
	errs := make(chan string, workers*perWorker)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				rec := serve(r, scoreRequest("ep", testPrimary, `{"i":1}`))
				if rec.Code != http.StatusOK {
					errs <- rec.Body.String()
				}
				_ = r.Stats("ep")
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 60; i++ {
			r.SetEndpoint(configs[i%len(configs)])
			r.SetEndpoint(keyEndpoint("other", nil)) // other endpoints come and go
			r.RemoveEndpoint("other")
		}
	}()
	wait(t, done, "the updater")
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("request failed during updates: %s", e)
	}
	var total uint64
	for _, s := range r.Stats("ep") {
		total += s.Requests
		if s.InFlight != 0 {
			t.Fatalf("in-flight count leaked: %+v", s)
		}
	}
	if total != workers*perWorker {
		t.Fatalf("stats count %d requests, want %d", total, workers*perWorker)
	}
}

func TestSetEndpoint_CopiesItsInput(t *testing.T) {
	blue, green := newBackend(t, "blue"), newBackend(t, "green")
	r := newTestRouter(t, Options{})
	e := keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, blue), deployment("green", 1, green))
	r.SetEndpoint(e)
	e.Traffic["blue"], e.Traffic["green"] = 0, 100
	e.Deployments["blue"].Backends[0].Ready = false
	rec := serve(r, scoreRequest("ep", testPrimary, `{}`))
	if rec.Code != http.StatusOK || rec.Body.String() != "blue" {
		t.Fatalf("the router saw the caller's later edits: %d %q", rec.Code, rec.Body.String())
	}
}
