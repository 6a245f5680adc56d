package router

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
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

// headerValue is h.Get for a key already in canonical form: Get canonicalizes its key,
// which allocates for one that is not.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// splitScoringPath splits "/{endpoint}/score[/...]" into the endpoint and "/score[/...]".
func splitScoringPath(p string) (name, suffix string, ok bool) {
	if len(p) < 2 || p[0] != '/' {
		return "", "", false
	}
	i := strings.IndexByte(p[1:], '/')
	if i <= 0 {
		return "", "", false
	}
	name, suffix = p[1:1+i], p[1+i:]
	if suffix != "/score" && !strings.HasPrefix(suffix, "/score/") {
		return "", "", false
	}
	return name, suffix, true
}

// authorize checks "Authorization: Bearer <credential>" against the endpoint.
func (ep *endpointState) authorize(header string) bool {
	tok, ok := bearerToken(header)
	if !ok {
		return false
	}
	switch ep.authMode {
	case AuthModeKey:
		// Compare digests: constant time in the content and the length of the keys, and
		// both keys are always compared, so timing does not tell which one matched.
		d := sha256.Sum256([]byte(tok))
		match := 0
		for i := range ep.keyDigests {
			match |= subtle.ConstantTimeCompare(d[:], ep.keyDigests[i][:])
		}
		return match == 1
	case AuthModeAMLToken:
		return ep.verify != nil && ep.verify(tok)
	}
	return false
}

func bearerToken(header string) (string, bool) {
	const prefix = "Bearer "
	if len(header) < len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return "", false
	}
	tok := strings.TrimSpace(header[len(prefix):])
	return tok, tok != ""
}

// requestID keeps the client's request id when it is a sane token, or makes a UUID in buf
// (which must never change after).
func requestID(in string, buf *[36]byte) string {
	if in != "" && len(in) <= 128 {
		ok := true
		for i := 0; i < len(in); i++ {
			if in[i] < 0x21 || in[i] > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return in
		}
	}
	return newUUID(buf)
}

// newUUID returns a random (version 4) UUID. Request ids need uniqueness, not secrecy, so
// math/rand/v2's per-thread ChaCha8 source is enough and cheap.
func newUUID(s *[36]byte) string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return unsafe.String(&s[0], len(s))
}

// setTarget points u at the instance base URL followed by the escaped request suffix.
func setTarget(u, base *url.URL, suffix string) {
	u.Scheme, u.Host, u.User, u.Fragment, u.RawFragment = base.Scheme, base.Host, nil, "", ""
	basePath := strings.TrimSuffix(base.Path, "/")
	if strings.IndexByte(suffix, '%') < 0 && base.RawPath == "" {
		u.Path, u.RawPath = basePath+suffix, ""
		return
	}
	unescaped, err := url.PathUnescape(suffix)
	if err != nil { // EscapedPath never yields this; forward it untouched
		unescaped = suffix
	}
	u.Path = basePath + unescaped
	u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + suffix
}

func (r *Router) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      upstream{r: r},
		ModifyResponse: modifyResponse,
		ErrorHandler:   r.proxyError,
		BufferPool:     bufferPool{},
		ErrorLog:       r.log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
}

// rewrite builds the upstream request. The proxy already removed hop-by-hop headers
// (and those named in Connection) and any X-Forwarded-* the client sent.
func rewrite(pr *httputil.ProxyRequest) {
	a := attemptOf(pr.In.Context())
	out := pr.Out
	setTarget(out.URL, a.in.url, a.suffix)
	out.Host = ""
	out.Header.Del("Authorization")
	out.Header.Set(RequestIDHeader, a.requestID)
	pr.SetXForwarded()
	if a.hasBody {
		// Lets the transport replay the body on a fresh connection when a pooled one
		// turns out dead before anything was written.
		out.GetBody = a.getBody
	}
}

func (a *attempt) getBody() (io.ReadCloser, error) {
	if a.body.read.Load() {
		return nil, errors.New("request body already sent, cannot replay it")
	}
	return &a.body, nil
}

// modifyResponse records the status and sets the router's response headers, replacing
// any the instance sent.
func modifyResponse(res *http.Response) error {
	a := attemptOf(res.Request.Context())
	a.status = res.StatusCode
	res.Header.Set(RequestIDHeader, a.requestID)
	res.Header.Set(DeploymentHeader, a.dep.name)
	return nil
}

// proxyError answers a request whose upstream exchange failed before a response.
func (r *Router) proxyError(w http.ResponseWriter, req *http.Request, err error) {
	ctx := req.Context()
	a := attemptOf(ctx)
	h := w.Header()
	h.Set(RequestIDHeader, a.requestID)
	h.Set(DeploymentHeader, a.dep.name)
	r.upstreamError(w, ctx, a, err, false)
}

// upstreamError answers a request that failed before a response: 504 after the request
// timeout, nothing useful when the client went away (or, with clientSide, when reading
// its body failed), 502 otherwise. w already carries the router's response headers.
func (r *Router) upstreamError(w http.ResponseWriter, ctx context.Context, a *attempt, err error, clientSide bool) {
	switch {
	case a.isTimedOut():
		a.status = http.StatusGatewayTimeout
		writeError(w, errTimeout(a.dep))
	case ctx.Err() != nil || a.over() || clientSide:
		// The client went away (or the server is shutting down): nobody reads this.
		a.status = 0
		a.dep.stats.canceled.Add(1)
		r.log.Debug("request canceled", "deployment", a.dep.name, "request_id", a.requestID, "error", err)
		writeError(w, &Error{Status: http.StatusBadGateway, Code: CodeBadGateway, Message: "request canceled"})
	default:
		a.status = http.StatusBadGateway
		r.log.Warn("instance failed", "deployment", a.dep.name, "instance", a.in.id,
			"request_id", a.requestID, "retried", a.retried, "error", err)
		writeError(w, errInstanceFailed(a.dep, a.in))
	}
}

// retryOn moves a, whose instance could not be connected to, to another ready instance
// of its deployment that has room and that usable accepts, once. It returns the new
// instance, or nil when there is none (or a already retried).
func (r *Router) retryOn(a *attempt, err error, usable func(*instance) bool) *instance {
	if a.retried {
		return nil
	}
	next := r.moveToAnother(a.dep, a.in, usable, a.requestID, err)
	if next != nil {
		a.in, a.retried = next, true
	}
	return next
}

// moveToAnother moves a request whose instance failed could not be connected to onto
// another ready instance of dep that has room and that usable (nil: any) accepts: it takes
// that instance's slot, releases failed's, and counts and logs the retry. It returns the
// new instance, or nil when there is none. Both server paths retry through it.
func (r *Router) moveToAnother(dep *deploymentState, failed *instance, usable func(*instance) bool, requestID string, err error) *instance {
	next := dep.acquire(failed)
	if next == nil {
		return nil
	}
	if usable != nil && !usable(next) {
		next.release()
		return nil
	}
	failed.release()
	dep.stats.retries.Add(1)
	r.log.Warn("instance unreachable, retrying on another", "deployment", dep.name,
		"instance", failed.id, "retry_instance", next.id, "request_id", requestID, "error", err)
	return next
}

// upstream is the proxy's transport: the router's transport plus one retry on another
// instance when the chosen one cannot be connected to.
type upstream struct{ r *Router }

func (u upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := u.r.transport.RoundTrip(req)
	if err == nil {
		return res, nil
	}
	ctx := req.Context()
	a := attemptOf(ctx)
	if a == nil || ctx.Err() != nil || !isDialError(err) || a.body.read.Load() {
		return nil, err
	}
	next := u.r.retryOn(a, err, nil)
	if next == nil {
		return nil, err
	}
	retry := req.Clone(ctx)
	setTarget(retry.URL, next.url, a.suffix)
	retry.Host = ""
	if a.hasBody {
		retry.Body = &a.body
	}
	return u.r.transport.RoundTrip(retry)
}

// isDialError reports whether err happened while connecting, before any byte of the
// request was written.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
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

// bufferPool recycles the proxy's copy buffers.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }
