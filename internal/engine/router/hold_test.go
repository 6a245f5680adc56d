package router

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"

	testingclock "k8s.io/utils/clock/testing"
)

// holdDeployment is an autoscaled deployment with the given backends whose Kick reports on
// kicks; max_queue_wait 10 s, request timeout 1 s.
func holdDeployment(kicks chan struct{}, maxHeld int64, bs ...*testbackend.Backend) *Deployment {
	d := deployment("blue", 1, bs...)
	d.RequestTimeout = time.Second
	d.Hold = &Hold{MaxWait: 10 * time.Second, MaxHeld: maxHeld, WhileStarting: true, Kick: func() { kicks <- struct{}{} }}
	return d
}

func newHoldRouter(t *testing.T) (*Router, *testingclock.FakeClock) {
	clk := testingclock.NewFakeClock(time.Date(2025, 1, 13, 12, 0, 0, 0, time.UTC))
	return newTestRouter(t, Options{Clock: clk}), clk
}

// From zero: the request is held, kicks the autoscaler at once, and is served by the first
// instance that becomes ready, however long after its request timeout that is: the timeout
// runs from dispatch.
func TestHoldFromZeroServesOnceAnInstanceIsReady(t *testing.T) {
	r, clk := newHoldRouter(t)
	kicks := make(chan struct{}, 8)
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, holdDeployment(kicks, 2)))
	res := serveAsync(r, scoreRequest("ep", testPrimary, "{}"))
	wait(t, kicks, "the kick of a held request")
	if held := r.Stats("ep")["blue"].Held; held != 1 {
		t.Fatalf("held = %d; want 1", held)
	}
	clk.Step(5 * time.Second) // past the 1 s request timeout, within the 10 s wait
	b := testbackend.New(t, "b0")
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, holdDeployment(kicks, 2, b)))
	rec := wait(t, res, "the held request's answer")
	expectStatus(t, rec, http.StatusOK)
	if rec.Body.String() != "b0" {
		t.Fatalf("body %q; want b0", rec.Body.String())
	}
	if st := r.Stats("ep")["blue"]; st.Held != 0 || st.Responses2xx != 1 {
		t.Fatalf("stats %+v; want none held and one 2xx", st)
	}
}

// Past max_queue_wait_ms a held request gets 429 with Retry-After.
func TestHoldTimesOutWith429(t *testing.T) {
	r, clk := newHoldRouter(t)
	kicks := make(chan struct{}, 8)
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, holdDeployment(kicks, 2)))
	res := serveAsync(r, scoreRequest("ep", testPrimary, "{}"))
	wait(t, kicks, "the kick")
	clk.Step(10 * time.Second)
	rec := wait(t, res, "the answer")
	expectStatus(t, rec, http.StatusTooManyRequests)
	if rec.Header().Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if e := decodeError(t, rec); !strings.Contains(e.Message, "max_queue_wait_ms (10000 ms)") {
		t.Fatalf("message %q", e.Message)
	}
}

// Beyond the bound, a request is refused at once with 429 and Retry-After.
func TestHoldBoundAnswers429AtOnce(t *testing.T) {
	r, _ := newHoldRouter(t)
	kicks := make(chan struct{}, 8)
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, holdDeployment(kicks, 2)))
	first := serveAsync(r, scoreRequest("ep", testPrimary, "{}"))
	second := serveAsync(r, scoreRequest("ep", testPrimary, "{}"))
	wait(t, kicks, "the first kick")
	wait(t, kicks, "the second kick")
	rec := serve(r, scoreRequest("ep", testPrimary, "{}"))
	expectStatus(t, rec, http.StatusTooManyRequests)
	if rec.Header().Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if e := decodeError(t, rec); !strings.Contains(e.Message, "2 requests are already held") {
		t.Fatalf("message %q", e.Message)
	}
	b := testbackend.New(t, "b0")
	d := holdDeployment(kicks, 2, b)
	d.MaxConcurrentPerInstance = 2
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))
	expectStatus(t, wait(t, first, "the first held answer"), http.StatusOK)
	expectStatus(t, wait(t, second, "the second held answer"), http.StatusOK)
}

// An instance that cannot start answers the held requests 503 with the start error at once,
// and new requests too while no instance is ready.
func TestHoldStartErrorAnswers503AtOnce(t *testing.T) {
	r, _ := newHoldRouter(t)
	kicks := make(chan struct{}, 8)
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, holdDeployment(kicks, 4)))
	res := serveAsync(r, scoreRequest("ep", testPrimary, "{}"))
	wait(t, kicks, "the kick")
	d := holdDeployment(kicks, 4)
	d.Hold.StartError = "exit status 3"
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, d))
	rec := wait(t, res, "the held answer")
	expectStatus(t, rec, http.StatusServiceUnavailable)
	if e := decodeError(t, rec); !strings.Contains(e.Message, "could not start: exit status 3") {
		t.Fatalf("message %q", e.Message)
	}
	rec = serve(r, scoreRequest("ep", testPrimary, "{}"))
	expectStatus(t, rec, http.StatusServiceUnavailable)
}

// A held request takes the slot a finished request frees.
func TestHoldTakesAReleasedSlot(t *testing.T) {
	r, _ := newHoldRouter(t)
	kicks := make(chan struct{}, 8)
	b := testbackend.NewHolding(t, "b0")
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, holdDeployment(kicks, 2, b)))
	first := serveAsync(r, scoreRequest("ep", testPrimary, "{}"))
	wait(t, b.Entered, "the first request at the instance")
	second := serveAsync(r, scoreRequest("ep", testPrimary, "{}"))
	wait(t, kicks, "the second request's kick")
	b.ReleaseAll()
	expectStatus(t, wait(t, first, "the first answer"), http.StatusOK)
	expectStatus(t, wait(t, second, "the second answer"), http.StatusOK)
	if n := b.Hits.Load(); n != 2 {
		t.Fatalf("instance got %d requests; want 2", n)
	}
}

// A fixed deployment's Hold (not WhileStarting, no Kick) answers 503 at once while no
// instance is ready, and holds a request that finds every ready instance busy until a slot
// is released, or 429 past max_queue_wait_ms.
func TestFixedHoldHoldsOnlyWhenBusy(t *testing.T) {
	r, clk := newHoldRouter(t)
	fixed := func(bs ...*testbackend.Backend) *Deployment {
		d := deployment("blue", 1, bs...)
		d.Hold = &Hold{MaxWait: 500 * time.Millisecond, MaxHeld: 2}
		return d
	}
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, fixed()))
	rec := serve(r, scoreRequest("ep", testPrimary, "{}"))
	expectStatus(t, rec, http.StatusServiceUnavailable)
	if e := decodeError(t, rec); !strings.Contains(e.Message, "has no ready instance") {
		t.Fatalf("message %q", e.Message)
	}

	b := testbackend.NewHolding(t, "b0")
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, fixed(b)))
	first := serveAsync(r, scoreRequest("ep", testPrimary, "{}"))
	wait(t, b.Entered, "the first request at the instance")
	second := serveAsync(r, scoreRequest("ep", testPrimary, "{}"))
	waitHeld(t, r, 1)
	b.ReleaseAll()
	expectStatus(t, wait(t, first, "the first answer"), http.StatusOK)
	expectStatus(t, wait(t, second, "the held answer"), http.StatusOK)

	b2 := testbackend.NewHolding(t, "b2")
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, fixed(b2)))
	third := serveAsync(r, scoreRequest("ep", testPrimary, "{}"))
	wait(t, b2.Entered, "the third request at the instance")
	fourth := serveAsync(r, scoreRequest("ep", testPrimary, "{}"))
	waitHeld(t, r, 1)
	clk.Step(500 * time.Millisecond)
	rec = wait(t, fourth, "the held request's 429")
	expectStatus(t, rec, http.StatusTooManyRequests)
	if rec.Header().Get("Retry-After") == "" {
		t.Fatal("429 of a held request without Retry-After")
	}
	b2.ReleaseAll()
	expectStatus(t, wait(t, third, "the third answer"), http.StatusOK)
}

// waitHeld waits until the router holds n requests of ep's blue.
func waitHeld(t *testing.T, r *Router, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); r.Stats("ep")["blue"].Held != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("held = %d; want %d", r.Stats("ep")["blue"].Held, n)
		}
	}
}

// A deployment without a Hold still answers at once: 503 with no instance, 429 when full.
func TestNoHoldAnswersAtOnce(t *testing.T) {
	r, _ := newHoldRouter(t)
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1)))
	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, "{}")), http.StatusServiceUnavailable)
}

// The event loops hand a request that must be held to the lean server, which holds it.
func TestLoopHandsHeldRequestsToTheLeanServer(t *testing.T) {
	r, _ := newHoldRouter(t)
	kicks := make(chan struct{}, 8)
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, holdDeployment(kicks, 2)))
	f := newFront(t, r)
	res := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, f.URL+ScoringPath("ep"), strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+testPrimary)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			res <- -1
			return
		}
		resp.Body.Close()
		res <- resp.StatusCode
	}()
	wait(t, kicks, "the kick")
	b := testbackend.New(t, "b0")
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, holdDeployment(kicks, 2, b)))
	if code := wait(t, res, "the answer"); code != http.StatusOK {
		t.Fatalf("status %d; want 200", code)
	}
}
