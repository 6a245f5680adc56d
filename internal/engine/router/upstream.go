package router

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/httpsyntax"
)

// The router's own HTTP/1.1 client carries the common request: a body of at most
// maxBufferedBody bytes, already read into memory, to a plain-HTTP instance. It writes the
// request head and body with one system call and reads the response on the handler's
// goroutine, over keep-alive connections pooled per instance. http.Transport would spend
// two goroutines per connection, a channel hand-off each way per request and a separate
// write for the head of any body it does not know to be in memory; on a loopback backend
// that machinery costs more than the proxying itself. Everything else (larger or
// streaming bodies, protocol upgrades, HTTPS instances, a caller's own
// Options.Transport) goes through httputil.ReverseProxy and the transport, as before.

const (
	// maxBufferedBody is the largest request body read into memory before forwarding.
	maxBufferedBody = 64 << 10
	// maxIdlePerInstance bounds the idle connections kept per instance (as NewTransport).
	maxIdlePerInstance = 1024
	// idleConnTimeout is how long an idle connection stays usable (as NewTransport).
	idleConnTimeout = 90 * time.Second
	// upstreamReadBuffer is the read buffer of one instance connection.
	upstreamReadBuffer = 16 << 10
)

// upstreamDialer dials instances with NewTransport's settings.
var upstreamDialer = &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}

// aLongTimeAgo is a deadline in the past: setting it makes blocked I/O return at once.
var aLongTimeAgo = time.Unix(1, 0)

// Request bodies are read into pooled buffers: small ones for the usual small body of
// known length, so requests in flight do not each hold the largest size, and large ones
// with a byte more than the limit, which tells a body that is too large from one that
// fits exactly.
const smallBody = 4 << 10

var (
	smallBodyBuffers = sync.Pool{New: func() any { b := make([]byte, smallBody); return &b }}
	largeBodyBuffers = sync.Pool{New: func() any { b := make([]byte, maxBufferedBody+1); return &b }}
)

// bodyBuffer returns a buffer for a body of n bytes (-1: unknown length).
func bodyBuffer(n int64) *[]byte {
	if n >= 0 && n <= smallBody {
		return smallBodyBuffers.Get().(*[]byte)
	}
	return largeBodyBuffers.Get().(*[]byte)
}

// putBodyBuffer returns a buffer of bodyBuffer to its pool.
func putBodyBuffer(b *[]byte) {
	if len(*b) == smallBody {
		smallBodyBuffers.Put(b)
	} else {
		largeBodyBuffers.Put(b)
	}
}

// connPool holds one instance's idle connections, the most recently used last.
type connPool struct {
	mu     sync.Mutex
	idle   []*upConn
	closed bool
}

// upConn is one keep-alive connection to an instance.
type upConn struct {
	nc        net.Conn
	br        *bufio.Reader
	head      []byte // the request being written, reused
	idleSince time.Time

	// For idleAlive.
	raw     syscall.RawConn
	peek    func(fd uintptr) bool
	peekBuf [1]byte
	quiet   bool

	// resp is the response readHeadFast parses into (response_fast.go).
	resp respHead
}

// abort makes the connection's blocked and future I/O fail at once.
func (c *upConn) abort() { _ = c.nc.SetDeadline(aLongTimeAgo) }

// get returns the most recently used idle connection, or nil. A connection idle for
// longer than idleConnTimeout is closed, with every older one.
func (p *connPool) get(now time.Time) *upConn {
	p.mu.Lock()
	n := len(p.idle)
	if n == 0 {
		p.mu.Unlock()
		return nil
	}
	c := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	if now.Sub(c.idleSince) < idleConnTimeout {
		p.mu.Unlock()
		return c
	}
	stale := append(p.idle, c)
	p.idle = nil
	p.mu.Unlock()
	closeAll(stale)
	return nil
}

// put keeps c for reuse, or closes it when the pool is closed or full.
func (p *connPool) put(c *upConn, now time.Time) {
	c.idleSince = now
	p.mu.Lock()
	if p.closed || len(p.idle) >= maxIdlePerInstance {
		p.mu.Unlock()
		_ = c.nc.Close()
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// drop closes every idle connection; the pool stays usable. After one pooled connection
// turned out dead (the instance restarted, or closed it for idleness), the older ones are
// almost certainly dead too.
func (p *connPool) drop() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	closeAll(idle)
}

// isClosed reports whether the pool's instance left the table.
func (p *connPool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// close closes the idle connections and those returned later.
func (p *connPool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	closeAll(idle)
}

func closeAll(cs []*upConn) {
	for _, c := range cs {
		_ = c.nc.Close()
	}
}

// errStaleConn marks a pooled connection that turned out closed by the instance before it
// could have read any of the request: the request is sent again on a fresh connection.
var errStaleConn = errors.New("pooled connection closed by the instance")

// exchange sends req (head built from the inbound request, body in memory) to in and
// returns the response. Its Body reads from the connection; at the end of the body the
// connection goes back to in's pool. The request's end (its timeout, or the client going
// away; see attempt) aborts the exchange, the body included, and closes the connection,
// so the instance sees its request end.
//
// A request is sent twice only when the instance cannot have read the first copy (nothing
// was written), or when it is idempotent as http.Transport counts it: a model that crashes
// on a request must not be handed that request again.
func (r *Router) exchange(req *http.Request, a *attempt, in *instance, body []byte) (*http.Response, error) {
	if a.over() {
		return nil, errRequestEnded // do not spend a pooled connection on a request already over
	}
	for tries := 0; ; tries++ {
		c := in.pool.get(r.clock.Now())
		if c != nil && !c.idleAlive() {
			// The instance closed it while it sat idle (it restarted, or has its own idle
			// timeout): the older connections are almost certainly closed too.
			_ = c.nc.Close()
			in.pool.drop()
			c = nil
		}
		reused := c != nil
		if !reused {
			nc, err := dial(req, a, in.addr)
			if err != nil {
				return nil, err
			}
			c = &upConn{nc: nc, br: bufio.NewReaderSize(nc, upstreamReadBuffer)}
		}
		res, err := r.exchangeOn(c, req, a, in, body, reused)
		if errors.Is(err, errStaleConn) && tries == 0 && !a.over() {
			in.pool.drop()
			continue
		}
		return res, err
	}
}

// dial opens a connection to an instance; the request's end cancels it.
func dial(req *http.Request, a *attempt, addr string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	if !a.setDialCancel(cancel) {
		return nil, errRequestEnded
	}
	nc, err := upstreamDialer.DialContext(ctx, "tcp", addr)
	a.setDialCancel(nil)
	return nc, err
}

// idleAlive reports whether an idle connection is still open and quiet: a peek that does
// not wait finds neither the instance's close nor stray bytes. (A read with a deadline in
// the past would not do: Go fails it before asking the kernel.)
func (c *upConn) idleAlive() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	if c.raw == nil {
		sc, ok := c.nc.(syscall.Conn)
		if !ok {
			return true
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		// Made once per connection, so a request spends no allocation on the check.
		c.raw = raw
		c.peek = c.peekFunc()
	}
	c.quiet = false
	return c.raw.Read(c.peek) == nil && c.quiet
}

// idempotent reports whether req may be sent again after the instance may have read it:
// the rule of http.Transport (safe methods, or an idempotency key the client set).
func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

func (r *Router) exchangeOn(c *upConn, req *http.Request, a *attempt, in *instance, body []byte, reused bool) (*http.Response, error) {
	nc := c.nc
	if !a.attach(c) {
		_ = nc.Close()
		return nil, errRequestEnded
	}

	c.head = appendRequestHead(c.head[:0], req, a.requestURI, a.requestID, in, len(body))
	var err error
	var written int64
	if len(c.head)+len(body) <= 16<<10 {
		c.head = append(c.head, body...)
		var n int
		n, err = nc.Write(c.head)
		written = int64(n)
	} else {
		bufs := net.Buffers{c.head, body}
		written, err = bufs.WriteTo(nc)
	}
	// On a reused connection, a failure before any byte of a response means the instance
	// closed it: a fresh connection may carry the request again when the instance cannot
	// have read this copy, or when reading it twice does no harm.
	retryable := reused && !a.over() && (written == 0 || idempotent(req))
	if err != nil {
		if retryable {
			return failOn(a, nc, fmt.Errorf("%w: %w", errStaleConn, err))
		}
		return failOn(a, nc, err)
	}

	var res *http.Response
	for {
		if _, err := c.br.Peek(1); err != nil {
			if retryable && res == nil && !a.over() {
				return failOn(a, nc, fmt.Errorf("%w: %w", errStaleConn, err))
			}
			return failOn(a, nc, err)
		}
		if res = c.readHeadFast(req, a.rv.block[:]); res != nil {
			break
		}
		res, err = http.ReadResponse(c.br, req)
		if err != nil {
			return failOn(a, nc, err)
		}
		// Interim responses (such as 100 Continue to a forwarded Expect) are not for the
		// client: the router already answered its Expect and has sent the whole body.
		if res.StatusCode < 200 {
			if res.StatusCode == http.StatusSwitchingProtocols {
				return failOn(a, nc, errors.New("instance switched protocols on a request that asked for no upgrade"))
			}
			continue
		}
		break
	}
	// The body lives in the attempt, which outlives its reading.
	a.upBody = upstreamBody{rc: res.Body, c: c, pool: in.pool, a: a, reuse: !res.Close, r: r}
	ub := &a.upBody
	if res.Body == nil { // parsed by readHeadFast: the body is the next ContentLength bytes
		ub.fixed = fixedBody{r: c.br, n: res.ContentLength}
		ub.rc = &ub.fixed
	}
	res.Body = ub
	return res, nil
}

// failOn ends an exchange that failed: the connection is closed, never reused.
func failOn(a *attempt, nc net.Conn, err error) (*http.Response, error) {
	a.detach()
	_ = nc.Close()
	return nil, err
}

// upstreamBody is a response body read from an instance connection. At its end the
// connection goes back to the pool; closed early, the connection is closed.
type upstreamBody struct {
	rc    io.ReadCloser
	c     *upConn
	pool  *connPool
	a     *attempt
	reuse bool
	done  bool
	r     *Router
	fixed fixedBody // rc's storage for a response readHeadFast parsed
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.finish(true)
	}
	return n, err
}

func (b *upstreamBody) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

// finish gives the connection back when the whole response was read and nothing else
// arrived after it; detach reports false when the request's end may have poisoned its
// deadline.
func (b *upstreamBody) finish(eof bool) {
	b.done = true
	if b.a.detach() && eof && b.reuse && b.c.br.Buffered() == 0 {
		b.pool.put(b.c, b.r.clock.Now())
		return
	}
	_ = b.c.nc.Close()
}

// appendRequestHead appends the HTTP/1.1 request head of the upstream request to b: the
// inbound request's end-to-end headers without the credential, plus the router's own.
// The inbound header passed the server's validation, so it is written as it is.
func appendRequestHead(b []byte, req *http.Request, uri, requestID string, in *instance, bodyLen int) []byte {
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, uri...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, in.url.Host...)
	b = append(b, "\r\n"...)
	connHeader := req.Header["Connection"]
	for k, vv := range req.Header {
		if notForwarded(k) || (len(connHeader) > 0 && headerValuesContainToken(connHeader, k)) {
			continue
		}
		for _, v := range vv {
			if v == "" && k == "User-Agent" {
				continue // as http.Transport: an empty User-Agent is not sent
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if headerValuesContainToken(req.Header["Te"], "trailers") {
		b = append(b, "Te: trailers\r\n"...)
	}
	b = append(b, "X-Request-Id: "...)
	b = append(b, requestID...)
	if clientIP, _, err := net.SplitHostPort(req.RemoteAddr); err == nil {
		b = append(b, "\r\nX-Forwarded-For: "...)
		b = append(b, clientIP...)
	}
	b = append(b, "\r\nX-Forwarded-Host: "...)
	b = append(b, req.Host...)
	if req.TLS != nil {
		b = append(b, "\r\nX-Forwarded-Proto: https\r\n"...)
	} else {
		b = append(b, "\r\nX-Forwarded-Proto: http\r\n"...)
	}
	if bodyLen > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = appendInt(b, bodyLen)
		b = append(b, "\r\n"...)
	}
	return append(b, "\r\n"...)
}

// notForwarded reports the inbound headers the upstream request never carries as they
// came: hop-by-hop ones, the credential, framing (rewritten for the buffered body), and
// those the router sets itself.
func notForwarded(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Authorization", "Content-Length", "Host", RequestIDHeader,
		"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return false
}

// headerValuesContainToken reports whether a comma-separated header value lists token
// (case-insensitively), as in Connection: keep-alive, X-Custom.
func headerValuesContainToken(values []string, token string) bool {
	for _, v := range values {
		if httpsyntax.HasToken(v, token) {
			return true
		}
	}
	return false
}

func appendInt(b []byte, n int) []byte {
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}
