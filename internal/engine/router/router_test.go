package router

import (
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"
)

func TestScoringPath(t *testing.T) {
	if got := ScoringPath("my-endpoint"); got != "/my-endpoint/score" {
		t.Fatalf("ScoringPath = %q", got)
	}
}

func TestTraffic_SeededSplitIsWithinBinomialTolerance(t *testing.T) {
	blue, green := testbackend.New(t, "blue"), testbackend.New(t, "green")
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
	if int(blue.Hits.Load()) != counts["blue"] || int(green.Hits.Load()) != counts["green"] {
		t.Fatalf("backend hits %d/%d disagree with response headers %v", blue.Hits.Load(), green.Hits.Load(), counts)
	}
}

func TestInstances_RoundRobinOnTiesAndLeastLoadedFirst(t *testing.T) {
	bs := []*testbackend.Backend{testbackend.New(t, "a"), testbackend.New(t, "b"), testbackend.New(t, "c")}
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 2, bs...)))
	// Sequential requests always find every instance idle: a tie, so round-robin.
	for i := 0; i < 9; i++ {
		expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{}`)), http.StatusOK)
	}
	for _, b := range bs {
		if b.Hits.Load() != 3 {
			t.Fatalf("instance %s got %d of 9 sequential requests, want 3", b.Name, b.Hits.Load())
		}
	}

	// With one request held on each of two instances, the idle one gets the next requests.
	held := testbackend.NewHolding(t, "held")
	idle := testbackend.New(t, "idle")
	r.SetEndpoint(keyEndpoint("ep2", map[string]int{"d": 100}, deployment("d", 2, held, held, idle)))
	// Instances 0 and 1 share a URL, so they are two instances of one server.
	h1 := serveAsync(r, scoreRequest("ep2", testPrimary, `{}`))
	wait(t, held.Entered, "first held request")
	h2 := serveAsync(r, scoreRequest("ep2", testPrimary, `{}`))
	wait(t, held.Entered, "second held request")
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
	held.ReleaseAll()
	expectStatus(t, wait(t, h1, "held response 1"), http.StatusOK)
	expectStatus(t, wait(t, h2, "held response 2"), http.StatusOK)
}

func TestSetEndpoint_WhileRequestsAreInFlight(t *testing.T) {
	blue, green, extra := testbackend.New(t, "blue"), testbackend.New(t, "green"), testbackend.New(t, "extra")
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
	blue, green := testbackend.New(t, "blue"), testbackend.New(t, "green")
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
