package router

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// ctxKey holds the request's *attempt in the upstream request's context, so the proxy's
// hooks and the transport see which deployment and instance serve it.
type ctxKey struct{}

// attempt is the per-request routing state. The proxy runs its hooks and the transport on
// the handler's goroutine, so the fields it uses need no locking; mu guards what the
// request timeout and the client's cancellation touch from their own goroutines.
//
// Attempts of the router's own client path are pooled with their timer: a request costs
// neither a fresh attempt, nor a timer, nor a context of its own. One whose timer or
// cancellation callback may still be running is left to the garbage collector instead.
type attempt struct {
	dep       *deploymentState
	in        *instance // the instance holding the request's slot
	suffix    string    // escaped path after the endpoint name: "/score..."
	requestID string
	body      trackedBody
	hasBody   bool
	retried   bool
	status    int // status the client got, 0 when it went away
	// readingBody is set while the router's own client path reads the request body.
	readingBody atomic.Bool
	// requestURI is the request target on a.in for the router's own client.
	requestURI string

	// w is the client's response writer, for cutting a body read on timeout.
	w http.ResponseWriter
	// timer fires the request timeout (onTimeoutFn); it is made once per pooled attempt.
	timer       clock.Timer
	onTimeoutFn func()
	onGoneFn    func()

	mu sync.Mutex
	// timedOut: the request timeout fired; gone: the client's request context ended.
	timedOut, gone bool
	// conn is the instance connection carrying the request, aborted by either.
	conn *upConn
	// rv is the request's responseValues.
	rv *responseValues
	// upBody is the response body of the router's own client.
	upBody upstreamBody
	// cancelDial cancels a dial under way; cancelProxy the proxy path's context.
	cancelDial  context.CancelFunc
	cancelProxy context.CancelCauseFunc
}

func attemptOf(ctx context.Context) *attempt {
	a, _ := ctx.Value(ctxKey{}).(*attempt)
	return a
}

// newAttempt returns a clean attempt, from the pool when one is there.
func (r *Router) newAttempt() *attempt {
	if a, ok := r.attempts.Get().(*attempt); ok {
		return a
	}
	a := &attempt{}
	// Bound once: a method value is an allocation each time it is taken.
	a.onTimeoutFn, a.onGoneFn = a.onTimeout, a.onGone
	return a
}

// recycle returns a to the pool, cleared but for its timer and callbacks.
func (r *Router) recycle(a *attempt) {
	timer, onTimeout, onGone := a.timer, a.onTimeoutFn, a.onGoneFn
	a.body.rc = nil
	a.body.read.Store(false)
	a.readingBody.Store(false)
	*a = attempt{timer: timer, onTimeoutFn: onTimeout, onGoneFn: onGone}
	r.attempts.Put(a)
}

// startTimer arms the request timeout.
func (r *Router) startTimer(a *attempt, d time.Duration) {
	if a.timer == nil {
		a.timer = r.clock.AfterFunc(d, a.onTimeoutFn)
		return
	}
	a.timer.Reset(d)
}

// onTimeout is the request timeout: it aborts whatever the request is waiting for.
func (a *attempt) onTimeout() {
	a.mu.Lock()
	a.timedOut = true
	a.abortLocked()
	if a.cancelProxy != nil {
		a.cancelProxy(errRequestTimeout)
	}
	w := a.w
	a.mu.Unlock()
	if w != nil && a.readingBody.Load() {
		// The timeout covers a client still sending its body too: cut the read. (Should
		// the read finish in between, the request still gets its 504, as timedOut is
		// already set; the client's connection just is not kept.)
		_ = http.NewResponseController(w).SetReadDeadline(aLongTimeAgo)
	}
}

// onGone runs when the client's request context ends (the client went away, or the
// server is shutting down): the instance's request is abandoned too.
func (a *attempt) onGone() {
	a.mu.Lock()
	a.gone = true
	a.abortLocked()
	a.mu.Unlock()
}

// abortLocked makes the upstream I/O under way fail at once.
func (a *attempt) abortLocked() {
	if a.conn != nil {
		a.conn.abort()
	}
	if a.cancelDial != nil {
		a.cancelDial()
	}
}

// over reports whether the request has ended: timed out, or abandoned by the client.
func (a *attempt) over() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.timedOut || a.gone
}

// isTimedOut reports whether the request timeout fired.
func (a *attempt) isTimedOut() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.timedOut
}

// attach makes c the connection the request's end aborts; false when it already ended.
func (a *attempt) attach(c *upConn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.timedOut || a.gone {
		return false
	}
	a.conn = c
	return true
}

// detach releases the connection; false when the request's end may have aborted it, so
// it must not be reused.
func (a *attempt) detach() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.conn = nil
	return !a.timedOut && !a.gone
}

// setDialCancel registers the cancellation of a dial under way (nil when it is over);
// false when the request already ended.
func (a *attempt) setDialCancel(cancel context.CancelFunc) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cancelDial = cancel
	return !a.timedOut && !a.gone
}

func (a *attempt) getBody() (io.ReadCloser, error) {
	if a.body.read.Load() {
		return nil, errors.New("request body already sent, cannot replay it")
	}
	return &a.body, nil
}

// trackedBody is the request body as the transport sees it: it records whether any of it
// was read (a request is retried only when none was) and ignores Close, so the body
// survives a failed attempt; the server closes the real body when the handler returns.
type trackedBody struct {
	rc   io.ReadCloser
	read atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	if !b.read.Load() {
		b.read.Store(true)
	}
	return b.rc.Read(p)
}

func (b *trackedBody) Close() error { return nil }
