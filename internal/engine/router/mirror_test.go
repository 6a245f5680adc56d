package router

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"
)

func mirrorEndpoint(blue, green *testbackend.Backend, greenMax int) Endpoint {
	e := keyEndpoint("ep", map[string]int{"blue": 100, "green": 0},
		deployment("blue", 4, blue), deployment("green", greenMax, green))
	e.Mirror = map[string]int{"green": 10}
	return e
}

func TestMirror_CopyArrivesAndNeverDelaysTheClient(t *testing.T) {
	blue, green := testbackend.New(t, "blue"), testbackend.NewHolding(t, "green")
	// Each request draws twice: 0 picks blue, 0.05 < 10% mirrors.
	r := newTestRouter(t, Options{Rand: sequence(t, 0, 0.05)})
	r.SetEndpoint(mirrorEndpoint(blue, green, 1))

	req := scoreRequest("ep", testPrimary, `{"input":[[1,2],[3,4]]}`)
	req.URL.RawQuery = "v=2"
	req.Header.Set(RequestIDHeader, "mirror-req-1")
	// The mirror holds its copy until released; the client's answer must not wait for it
	// (if it did, this would hang until the failsafe).
	rec := wait(t, serveAsync(r, req), "the client's response while the mirror is still busy")
	expectStatus(t, rec, http.StatusOK)
	if rec.Body.String() != "blue" || rec.Header().Get(DeploymentHeader) != "blue" {
		t.Fatalf("client got %q from %q, want the primary's answer", rec.Body.String(), rec.Header().Get(DeploymentHeader))
	}

	if id := wait(t, green.Entered, "the mirror copy"); id != "mirror-req-1" {
		t.Fatalf("mirror copy carries request id %q", id)
	}
	green.ReleaseAll()
	r.Close() // waits for the mirror goroutine to finish

	copies := green.Requests()
	if len(copies) != 1 {
		t.Fatalf("mirror got %d copies, want 1", len(copies))
	}
	c := copies[0]
	if c.Body != `{"input":[[1,2],[3,4]]}` || c.Method != http.MethodPost || c.Path != "/score" || c.RawQuery != "v=2" {
		t.Fatalf("mirror copy = %+v", c)
	}
	if c.Header.Get("Authorization") != "" || c.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("mirror copy headers %v", c.Header)
	}
	if b := blue.Requests(); len(b) != 1 || b[0].Body != `{"input":[[1,2],[3,4]]}` {
		t.Fatalf("primary got %+v", b)
	}
	st := r.Stats("ep")
	if st["green"].Mirrored != 1 || st["green"].Requests != 0 || st["blue"].Requests != 1 || st["green"].InFlight != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestMirror_DroppedWhenTheMirrorIsFullAndNotCountedAgainstThePrimary(t *testing.T) {
	blue, green := testbackend.New(t, "blue"), testbackend.NewHolding(t, "green")
	r := newTestRouter(t, Options{Rand: sequence(t, 0, 0, 0, 0, 0, 0)})
	e := mirrorEndpoint(blue, green, 1)
	e.Deployments["blue"].MaxConcurrentPerInstance = 1
	r.SetEndpoint(e)

	// First request: its copy occupies green's only slot.
	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{"n":1}`)), http.StatusOK)
	wait(t, green.Entered, "the first copy")
	// Later requests: green is full, so their copies are dropped, not queued; and blue,
	// with a limit of one, still serves them (the copy holds no slot of blue's).
	for i := 0; i < 2; i++ {
		expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{"n":2}`)), http.StatusOK)
	}
	st := r.Stats("ep")["green"]
	if st.Mirrored != 1 || st.MirrorDropped != 2 || st.InFlight != 1 {
		t.Fatalf("green stats = %+v", st)
	}
	green.ReleaseAll()
	r.Close()
	if n := green.Hits.Load(); n != 1 {
		t.Fatalf("mirror got %d copies, want 1", n)
	}
}

func TestMirror_NotForPinnedRequestsNorAboveThePercent(t *testing.T) {
	blue, green := testbackend.New(t, "blue"), testbackend.New(t, "green")
	// Unpinned: 0 picks blue, 0.1 is not below 10%: no copy. Pinned requests draw nothing.
	r := newTestRouter(t, Options{Rand: sequence(t, 0, 0.1)})
	r.SetEndpoint(mirrorEndpoint(blue, green, 1))

	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, `{}`)), http.StatusOK)
	req := scoreRequest("ep", testPrimary, `{}`)
	req.Header.Set(DeploymentHeader, "blue")
	expectStatus(t, serve(r, req), http.StatusOK)
	r.Close()
	if green.Hits.Load() != 0 {
		t.Fatalf("mirror got %d copies, want 0", green.Hits.Load())
	}
}

func TestMirror_BodyOverTheLimitIsNotMirroredButReachesThePrimary(t *testing.T) {
	blue, green := testbackend.New(t, "blue"), testbackend.New(t, "green")
	r := newTestRouter(t, Options{Rand: sequence(t, 0, 0, 0, 0), MaxMirrorBodyBytes: 16})
	r.SetEndpoint(mirrorEndpoint(blue, green, 4))

	big := strings.Repeat("x", 100)
	// Known length over the limit: dropped without reading.
	expectStatus(t, serve(r, scoreRequest("ep", testPrimary, big)), http.StatusOK)
	// Unknown length (chunked) over the limit: read up to the limit, then given back whole.
	req := scoreRequest("ep", testPrimary, "")
	req.Body = readCloser{strings.NewReader(big), http.NoBody}
	req.ContentLength = -1
	expectStatus(t, serve(r, req), http.StatusOK)
	r.Close()

	if green.Hits.Load() != 0 {
		t.Fatal("an oversized body was mirrored")
	}
	for _, s := range blue.Requests() {
		if s.Body != big {
			t.Fatalf("primary got %d bytes, want %d", len(s.Body), len(big))
		}
	}
	if st := r.Stats("ep")["green"]; st.MirrorDropped != 2 {
		t.Fatalf("green stats = %+v", st)
	}
}
