package router

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// ServeHTTP routes one scoring request; see the package documentation.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	h := w.Header()
	// One allocation holds the response headers' values and a generated request id; h.Set
	// would spend one per header.
	rv := &responseValues{}
	reqID := requestID(headerValue(req.Header, canonicalRequestIDHeader), &rv.id)
	a := r.newAttempt()
	pooled := true
	defer func() {
		if pooled {
			r.recycle(a)
		}
	}()
	a.requestID, a.rv = reqID, rv
	rv.vals[0] = reqID
	h[canonicalRequestIDHeader] = rv.vals[0:1:1]

	name, suffix, ok := splitScoringPath(req.URL.EscapedPath())
	if !ok {
		writeError(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound,
			Message: "no scoring route here: scoring requests go to /{endpoint}/score"})
		return
	}
	ep := r.table.Load().endpoints[name]
	if ep == nil {
		writeError(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound,
			Message: fmt.Sprintf("endpoint %q not found", name)})
		return
	}
	if !ep.authorize(headerValue(req.Header, "Authorization")) {
		h.Set("WWW-Authenticate", `Bearer realm="`+name+`"`)
		writeError(w, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
			Message: "missing or invalid credential: send Authorization: Bearer <key or token>"})
		return
	}

	pinned := headerValue(req.Header, canonicalDeploymentHeader)
	var dep *deploymentState
	if pinned != "" {
		if dep = ep.deployments[pinned]; dep == nil {
			writeError(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Deployments: ep.names,
				Message: fmt.Sprintf("deployment %q not found in endpoint %q; its deployments are: %s",
					pinned, name, strings.Join(ep.names, ", "))})
			return
		}
	} else if dep = ep.pick(r.rand()); dep == nil {
		writeError(w, errNoTraffic(name))
		return
	}
	rv.vals[1] = dep.name
	h[canonicalDeploymentHeader] = rv.vals[1:2:2]
	st := dep.stats
	st.requests.Add(1)

	in := dep.acquire(nil)
	if in == nil && dep.hold != nil {
		// Held until an instance has room: the request timeout starts only after.
		gone := make(chan struct{})
		stop := afterClientGone(w, req.Context(), func() { close(gone) })
		var herr *Error
		dep, in, herr = r.holdFor(name, dep, gone)
		stop()
		if herr != nil {
			st.observe(herr.Status)
			if herr == errClientGone {
				st.canceled.Add(1)
				return
			}
			if herr.Status == http.StatusTooManyRequests {
				st.rejected.Add(1)
				setRetryAfter(h)
			}
			writeError(w, herr)
			return
		}
	}
	if in == nil {
		if len(dep.ready) == 0 {
			st.observe(http.StatusServiceUnavailable)
			writeError(w, errNoReadyInstance(dep))
			return
		}
		st.rejected.Add(1)
		st.observe(http.StatusTooManyRequests)
		writeError(w, errBusy(dep))
		return
	}

	a.dep, a.in, a.suffix, a.w = dep, in, suffix, w
	r.startTimer(a, dep.timeout)
	// The client's going away ends the request too.
	stopGone := afterClientGone(w, req.Context(), a.onGoneFn)
	var bodyBuf *[]byte // pooled, returned when nothing else holds the body
	defer func() {
		// A callback that may still run keeps a out of the pool.
		if !a.timer.Stop() || !stopGone() {
			pooled = false
		}
		a.in.release()
		a.dep.released()
		if a.isTimedOut() {
			st.timeouts.Add(1)
		}
		st.observe(a.status)
		if bodyBuf != nil {
			putBodyBuffer(bodyBuf)
		}
	}()

	// The common request takes the router's own client (see upstream.go); anything
	// unusual keeps httputil.ReverseProxy over the transport.
	direct := r.direct && in.direct && req.ContentLength <= maxBufferedBody &&
		!headerValuesContainToken(req.Header["Connection"], "Upgrade") && plainQuery(req.URL.RawQuery)
	var body []byte
	if direct && req.Body != nil && req.Body != http.NoBody {
		var err error
		// Set the flag before looking at the timeout: one that fires now either sees the
		// flag and cuts the read, or is seen here.
		a.readingBody.Store(true)
		if !a.over() {
			bodyBuf, body, direct, err = readBody(req)
		} else {
			err = errRequestEnded
		}
		a.readingBody.Store(false)
		if err != nil {
			r.upstreamError(w, req.Context(), a, fmt.Errorf("reading the request body: %w", err), true)
			return
		}
		if direct {
			// Read to its end: closing it spares the server a discarding copy.
			_ = req.Body.Close()
		}
	}
	mirrored := pinned == "" && ep.mirror != nil && ep.mirror != dep && r.rand()*100 < float64(ep.mirrorPct)
	if direct {
		if mirrored && r.mirrorBuffered(ep.mirror, req, a, body) {
			bodyBuf = nil // the copy still reads it
		}
		r.forward(w, req, a, body)
		return
	}

	// The proxy path hands a to the transport through the request's context, which may
	// outlive the handler: it is not pooled.
	pooled = false
	ctx, cancel := context.WithCancelCause(req.Context())
	defer cancel(nil)
	a.mu.Lock()
	a.cancelProxy = cancel
	if a.timedOut {
		cancel(errRequestTimeout)
	}
	a.mu.Unlock()
	out := req.WithContext(context.WithValue(ctx, ctxKey{}, a))
	if mirrored {
		r.mirror(ep.mirror, out, a)
	}
	if out.Body != nil && out.Body != http.NoBody {
		a.body.rc = out.Body
		a.hasBody = true
		out.Body = &a.body
	}
	// From here the proxy owns the response headers; modifyResponse and proxyError set
	// ours. (Forwarding a 1xx response, such as 100 Continue, clears the header map.)
	h.Del(RequestIDHeader)
	h.Del(DeploymentHeader)
	r.proxy.ServeHTTP(w, out)
}

// clientGoneNotifier is a response writer whose server tells its handler that the client
// went away without a registration on the request's context, which costs several
// allocations per request (the engine's scoring server, internal/engine/router/leanserver).
type clientGoneNotifier interface {
	AfterClientGone(f func()) (stop func() bool)
}

// afterClientGone runs f when the request's client goes away, through the writer (or one
// it wraps) when it can tell, else as context.AfterFunc on ctx (a no-op on a context that
// is never done, such as a test's).
func afterClientGone(w http.ResponseWriter, ctx context.Context, f func()) (stop func() bool) {
	for {
		switch t := w.(type) {
		case clientGoneNotifier:
			return t.AfterClientGone(f)
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return context.AfterFunc(ctx, f)
		}
	}
}

// responseValues backs the values of the router's response headers. Unlike the attempt
// it is never reused: the server may write the header after the handler returned.
// Its block holds the instance's response header lines too when they fit, which most
// model servers' do (readHeadFast).
type responseValues struct {
	vals  [2]string
	id    [36]byte
	block [192]byte
}
