package router

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"
)

// A client that goes away while its instance works ends the instance's request too, and
// frees the slot; the next request, which may reuse the pooled per-request state, is
// served normally.
func TestClientGone_AbandonsTheUpstreamRequest(t *testing.T) {
	b := testbackend.NewHolding(t, "blue")
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 100}, deployment("blue", 1, b)))
	front := newFront(t, r)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, front.URL+ScoringPath("ep"), strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+testPrimary)
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	wait(t, b.Entered, "the request at the backend")
	cancel()
	if err := wait(t, done, "the client's request to end"); err == nil {
		t.Fatal("the cancelled client request succeeded")
	}
	wait(t, b.Canceled, "the backend to observe its request context done")

	front.over.await(t, 1, "the canceled request to be over")
	if st := r.Stats("ep")["blue"]; st.InFlight != 0 || st.ClientCanceled != 1 {
		t.Fatalf("stats = %+v; want the slot free and one canceled request", st)
	}

	b.ReleaseAll()
	res, err := http.DefaultClient.Do(scoreRequestTo(t, front.URL, "ep", "after"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "blue" || res.Header.Get(RequestIDHeader) != "after" {
		t.Fatalf("next request: %d %q, request id %q", res.StatusCode, body, res.Header.Get(RequestIDHeader))
	}
}

// Requests served one after another reuse pooled per-request state: each must carry its
// own request id to the instance and back, its own deployment header and its own answer.
func TestPooledState_EveryRequestKeepsItsOwnIDsAndHeaders(t *testing.T) {
	blue, green := testbackend.New(t, "blue"), testbackend.New(t, "green")
	r := newTestRouter(t, Options{})
	r.SetEndpoint(keyEndpoint("ep", map[string]int{"blue": 50, "green": 50},
		deployment("blue", 4, blue), deployment("green", 4, green)))
	front := newFront(t, r)

	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		req := scoreRequestTo(t, front.URL, "ep", "")
		if i%2 == 1 {
			req.Header.Set(DeploymentHeader, "green")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		id, dep := res.Header.Get(RequestIDHeader), res.Header.Get(DeploymentHeader)
		if res.StatusCode != http.StatusOK || string(body) != dep || len(res.Header[RequestIDHeader]) != 1 {
			t.Fatalf("request %d: %d %q from deployment %q, request ids %q", i, res.StatusCode, body, dep, res.Header[RequestIDHeader])
		}
		if i%2 == 1 && dep != "green" {
			t.Fatalf("request %d pinned to green was served by %q", i, dep)
		}
		if len(id) != 36 || seen[id] {
			t.Fatalf("request %d: request id %q is not a fresh UUID", i, id)
		}
		seen[id] = true
	}
	// Every id the clients got is one an instance got.
	forwarded := map[string]bool{}
	for _, b := range []*testbackend.Backend{blue, green} {
		for _, s := range b.Requests() {
			forwarded[s.Header.Get(RequestIDHeader)] = true
		}
	}
	for id := range seen {
		if !forwarded[id] {
			t.Fatalf("request id %q reached no instance", id)
		}
	}
}

// scoreRequestTo is a scoring request to a served router, with the request id when set.
func scoreRequestTo(t *testing.T, base, endpoint, requestID string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+ScoringPath(endpoint), strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testPrimary)
	if requestID != "" {
		req.Header.Set(RequestIDHeader, requestID)
	}
	return req
}
