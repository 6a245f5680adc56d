package router

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Hold is how a deployment treats a request that finds no instance with room
// (max_queue_wait_ms; DESIGN 3 and 4): instead of 503 (no instance) or 429 (all full) at
// once, the request is held until an instance has room or MaxWait passes. For an
// autoscaled deployment Kick tells the autoscaler at once, so one at zero instances starts
// one without waiting for its polling interval. Only requests that find no room pay for
// the feature; a Deployment without a Hold never holds.
type Hold struct {
	// MaxWait is max_queue_wait_ms: past it a held request gets 429 with Retry-After.
	MaxWait time.Duration
	// MaxHeld bounds the requests held at once (2 × max_concurrent_requests_per_instance ×
	// the instance count, max_instances when autoscaled); one more gets 429 with
	// Retry-After at once.
	MaxHeld int64
	// StartError, set while the deployment has no ready instance because its instance
	// failed to start, answers held and new requests 503 with it at once.
	StartError string
	// WhileStarting holds requests while the deployment has no ready instance, too (an
	// autoscaled deployment, which starts one when held requests Kick it). Without it a
	// deployment with no ready instance answers 503 at once, and only requests that find
	// every ready instance busy are held.
	WhileStarting bool
	// Kick, when set, is called (it must not block) each time a request is held.
	Kick func()
	// ObserveHold, when set, gets how long each held request waited and whether it got an
	// instance.
	ObserveHold func(wait time.Duration, served bool)
}

// holdState is a deployment's held requests; like the counters it carries over table
// updates, so a new table (an instance became ready) wakes the requests it holds.
type holdState struct {
	held atomic.Int64
	cfg  atomic.Pointer[Hold]
	mu   sync.Mutex
	// wake is closed, and replaced, when something a held request waits for may have
	// happened: a new table, a slot released, a start error.
	wake chan struct{}
}

func (h *holdState) waitCh() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wake == nil {
		h.wake = make(chan struct{})
	}
	return h.wake
}

func (h *holdState) signal() {
	h.mu.Lock()
	if h.wake != nil {
		close(h.wake)
		h.wake = nil
	}
	h.mu.Unlock()
}

// released is called after a slot of the deployment was released: a held request may take
// it. Without held requests it costs one atomic load.
func (d *deploymentState) released() {
	if h := d.hold; h != nil && h.held.Load() > 0 {
		h.signal()
	}
}

// holdRetryAfter is the Retry-After of the router's 429 to a held or refused request, in
// seconds.
const holdRetryAfter = 1

func errHoldFull(dep *deploymentState, limit int64) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: CodeTooManyRequests,
		Message: fmt.Sprintf("deployment %q is busy: %d requests are already held waiting for an instance (the bound is 2 × max_concurrent_requests_per_instance × its instance count, max_instances when autoscaled); retry after %d s", dep.name, limit, holdRetryAfter)}
}

func errHoldTimeout(dep *deploymentState, wait time.Duration) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: CodeTooManyRequests,
		Message: fmt.Sprintf("deployment %q had no instance with room within max_queue_wait_ms (%d ms); retry after %d s", dep.name, wait.Milliseconds(), holdRetryAfter)}
}

func errStartFailed(dep *deploymentState, why string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
		Message: fmt.Sprintf("deployment %q has no ready instance: its instance could not start: %s", dep.name, why)}
}

// errClientGone marks a held request whose client went away; nothing is written.
var errClientGone = &Error{Status: 0, Code: "client_gone", Message: "the client went away while its request was held"}

// holdChanged tells Options.OnHoldChange that a deployment's held count changed.
func (r *Router) holdChanged(endpoint, deployment string) {
	if r.onHold != nil {
		r.onHold(endpoint, deployment)
	}
}

// holdFor holds a request that found no instance with room in dep (which has a Hold) until
// an instance of the deployment, as the current table has it, grants it a slot. It returns
// the deployment state and instance to serve it, or the error to answer. gone is closed
// when the client goes away.
func (r *Router) holdFor(endpoint string, dep *deploymentState, gone <-chan struct{}) (*deploymentState, *instance, *Error) {
	h := dep.hold
	cfg := h.cfg.Load()
	if cfg.StartError != "" && len(dep.ready) == 0 {
		return dep, nil, errStartFailed(dep, cfg.StartError)
	}
	if !cfg.WhileStarting && len(dep.ready) == 0 {
		return dep, nil, errNoReadyInstance(dep)
	}
	if n := h.held.Add(1); n > cfg.MaxHeld {
		h.held.Add(-1)
		return dep, nil, errHoldFull(dep, cfg.MaxHeld)
	}
	r.holdChanged(endpoint, dep.name)
	defer func() {
		h.held.Add(-1)
		r.holdChanged(endpoint, dep.name)
	}()
	start := r.clock.Now()
	timer := r.clock.NewTimer(cfg.MaxWait)
	defer timer.Stop()
	if cfg.Kick != nil {
		cfg.Kick()
	}
	observe := func(served bool) {
		if cfg.ObserveHold != nil {
			cfg.ObserveHold(r.clock.Since(start), served)
		}
	}
	for {
		wake := h.waitCh()
		ep := r.table.Load().endpoints[endpoint]
		if ep == nil || ep.deployments[dep.name] == nil {
			observe(false)
			return dep, nil, errNoReadyInstance(dep)
		}
		cur := ep.deployments[dep.name]
		if in := cur.acquire(nil); in != nil {
			observe(true)
			return cur, in, nil
		}
		if c := h.cfg.Load(); len(cur.ready) == 0 && (c.StartError != "" || !c.WhileStarting) {
			observe(false)
			if c.StartError != "" {
				return cur, nil, errStartFailed(cur, c.StartError)
			}
			return cur, nil, errNoReadyInstance(cur)
		}
		select {
		case <-wake:
		case <-timer.C():
			observe(false)
			return cur, nil, errHoldTimeout(cur, cfg.MaxWait)
		case <-gone:
			observe(false)
			return cur, nil, errClientGone
		}
	}
}

// setRetryAfter adds Retry-After to a 429 of a held or refused request.
func setRetryAfter(h http.Header) {
	h.Set("Retry-After", strconv.Itoa(holdRetryAfter))
}
