package leanserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

const (
	// readBufferSize is a connection's read buffer, net/http's size: a usual request's
	// head must fit in it.
	readBufferSize = 4 << 10
	// writeBufferSize is a connection's write buffer.
	writeBufferSize = 4 << 10
	// watchDelay is how long a handler runs before its connection is watched for the
	// client going away (see the package documentation).
	watchDelay = 25 * time.Millisecond
	// maxDiscard is the most of an unread request body read and thrown away after its
	// handler returned so that the connection can be kept (net/http's
	// maxPostHandlerReadBytes); a larger rest closes the connection instead.
	maxDiscard = 256 << 10
	// discardTimeout bounds that read.
	discardTimeout = 10 * time.Second
)

// A connection's state, for Shutdown: an idle one (waiting for a request) may be closed.
const (
	stateIdle int32 = iota
	stateActive
	stateClosed
)

// aLongTimeAgo is a deadline in the past: setting it makes blocked I/O return at once.
var aLongTimeAgo = time.Unix(1, 0)

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufferSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufferSize) }}
)

// conn is one client connection served by the lean server.
type conn struct {
	s          *Server
	nc         net.Conn
	br         *bufio.Reader
	bw         *bufio.Writer
	ctx        context.Context
	remoteAddr string
	state      atomic.Int32
	// tlsState is the connection's TLS state after its handshake, every request's
	// Request.TLS (as net/http shares one per connection); nil when it is not TLS.
	tlsState *tls.ConnectionState
	// headBuf holds a response's header lines between WriteHeader and the first write.
	headBuf []byte
	// pending holds a response's first body bytes until its framing is decided.
	pending []byte
	// lineBuf is where a response's status line and header are put together.
	lineBuf []byte

	// current is the request being served, for stopGoneFn.
	current *exchange
	// stopGoneFn is current's AfterClientGone stop function, bound once.
	stopGoneFn func() bool

	// The watch of a request whose handler runs for watchDelay (watch.go).
	watchMu    sync.Mutex
	watchTimer clock.Timer
	watched    *exchange // the request the timer is for; nil between requests
	watching   bool
	watchDone  chan struct{}
	stopWatch  atomic.Bool // set while the watch is being ended on purpose
}

// exchange is one request and its response: one allocation per request, never reused, so
// that a handler keeping a reference past its return cannot touch the next request.
type exchange struct {
	url    url.URL
	body   body
	w      response
	cancel context.CancelFunc
	// onGone is the handler's AfterClientGone callback; gone says whether it was stopped
	// (goneStopped) or started (goneStarted).
	onGone func()
	gone   atomic.Int32
}

const (
	goneStopped int32 = 1 + iota
	goneStarted
)

// clientGone ends x because its client went away: its context is canceled and the
// handler's callback, unless stopped, runs.
func (c *conn) clientGone(x *exchange) {
	x.cancel()
	c.watchMu.Lock()
	f := x.onGone
	c.watchMu.Unlock()
	if f != nil && x.gone.CompareAndSwap(0, goneStarted) {
		f()
	}
}

func newConn(s *Server, nc net.Conn, base context.Context) *conn {
	c := &conn{s: s, nc: nc, remoteAddr: nc.RemoteAddr().String()}
	c.ctx = context.WithValue(base, http.LocalAddrContextKey, nc.LocalAddr())
	c.br = readers.Get().(*bufio.Reader)
	c.br.Reset(nc)
	c.bw = writers.Get().(*bufio.Writer)
	c.bw.Reset(nc)
	c.stopGoneFn = c.stopGone
	return c
}

// serve serves requests until the connection closes, fails, or is handed off.
func (c *conn) serve() {
	handedOff := false
	defer func() {
		if !handedOff {
			_ = c.nc.Close()
			c.br.Reset(nil)
			readers.Put(c.br)
		}
		c.bw.Reset(nil)
		writers.Put(c.bw)
		c.s.track(c, false)
	}()
	switch nc := c.nc.(type) {
	case *tls.Conn:
		if !c.handshake(nc) {
			return
		}
		if p := c.tlsState.NegotiatedProtocol; p != "" && p != "http/1.1" {
			// HTTP/2 (ALPN): net/http's, on the *tls.Conn itself as it would have it.
			handedOff = true
			c.s.handOff(c.nc, c.br, nil)
			return
		}
	case connectionStater:
		// A TLS connection whose handshake was done before it came here (the event
		// loops hand theirs over after it).
		st := nc.ConnectionState()
		c.tlsState = &st
	}
	// The first request's head, the wait for its first byte included, is bounded by
	// ReadHeaderTimeout, as in net/http; later ones by IdleTimeout, then it.
	first := c.s.ReadHeaderTimeout > 0
	if first {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
	}
	for {
		if !c.awaitRequest(first) {
			return
		}
		n, ok := c.readHead(first)
		first = false
		if n == 0 {
			return // the client went away, or took too long
		}
		buf, _ := c.br.Peek(n)
		var h head
		if ok {
			h, ok = parseHead(buf)
		}
		if !ok {
			// Not a usual request: net/http gets it, and the rest of the connection.
			_ = c.nc.SetReadDeadline(time.Time{})
			handedOff = true
			c.s.handOff(c.nc, c.br, c.tlsState)
			return
		}
		if c.s.IdleTimeout > 0 || c.s.ReadHeaderTimeout > 0 {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
		_, _ = c.br.Discard(n)
		if !c.serveRequest(&h) {
			return
		}
	}
}

// handshake runs the TLS handshake of a connection from a TLS listener before its first
// request (Server.Handshake) and records the connection's TLS state; false when the
// connection is to be closed.
func (c *conn) handshake(tc *tls.Conn) bool {
	st, ok := c.s.Handshake(c.ctx, tc, c.remoteAddr)
	c.tlsState = st
	return ok
}

// Handshake runs the TLS handshake of a connection as net/http does before its first
// request: under ReadHeaderTimeout (for reading and writing), a client that sent plain
// HTTP answered with net/http's 400, a failure reported to HandshakeFailed. It returns
// the connection's TLS state, or false when the connection is to be closed (the caller
// closes it). The scoring event loops, which serve TLS connections of their own, run
// their handshakes through it too.
func (s *Server) Handshake(ctx context.Context, tc *tls.Conn, remoteAddr string) (*tls.ConnectionState, bool) {
	if d := s.ReadHeaderTimeout; d > 0 {
		_ = tc.SetDeadline(time.Now().Add(d))
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) && rh.Conn != nil && recordHeaderLooksLikeHTTP(rh.RecordHeader) {
			_, _ = io.WriteString(rh.Conn, plainHTTPResponse)
			_ = rh.Conn.Close()
			err = ErrPlainHTTP
		}
		s.handshakeFailed(remoteAddr, err)
		return nil, false
	}
	if s.ReadHeaderTimeout > 0 {
		_ = tc.SetDeadline(time.Time{})
	}
	st := tc.ConnectionState()
	return &st, true
}

// connectionStater is a TLS connection handed over after its handshake: it says its
// state, which every request carries as Request.TLS.
type connectionStater interface {
	net.Conn
	ConnectionState() tls.ConnectionState
}

// ErrPlainHTTP is the handshake error of a client that sent plain HTTP to a TLS port.
var ErrPlainHTTP = errors.New("client sent an HTTP request to an HTTPS server")

// plainHTTPResponse is net/http's answer to plain HTTP on a TLS port, to the byte.
const plainHTTPResponse = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"

// recordHeaderLooksLikeHTTP reports whether the first five bytes a client sent to a TLS
// port start a plain HTTP request (net/http's test).
func recordHeaderLooksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// awaitRequest waits for the first byte of the next request; false when the connection
// is to be closed instead. first says the read deadline is set already.
func (c *conn) awaitRequest(first bool) bool {
	if !c.state.CompareAndSwap(stateActive, stateIdle) && c.state.Load() != stateIdle {
		return false
	}
	if c.s.closing.Load() && c.br.Buffered() == 0 {
		return false
	}
	if c.s.IdleTimeout > 0 && !first {
		// Socket deadlines are on the wall clock, not the server's Clock: the kernel
		// times them, and a fake clock's time means nothing to it (so here and below).
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.IdleTimeout))
	}
	if _, err := c.br.Peek(1); err != nil {
		return false
	}
	return c.state.CompareAndSwap(stateIdle, stateActive)
}

// readHead waits until the buffer holds a whole request head and returns its length,
// with ok false when it is not there for this server: larger than the buffer. n is 0
// when the connection failed first. deadline says the read deadline is set already.
func (c *conn) readHead(deadline bool) (n int, ok bool) {
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		if end := headEnd(buf); end > 0 {
			return end, true
		}
		if len(buf) == c.br.Size() {
			return len(buf), false
		}
		if !deadline && c.s.ReadHeaderTimeout > 0 {
			// The head did not come in one piece: now its time counts.
			_ = c.nc.SetReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
			deadline = true
		}
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			return 0, false
		}
	}
}

// serveRequest runs the handler for a usual request and finishes its response; false
// when the connection is to be closed.
func (c *conn) serveRequest(h *head) (keep bool) {
	x := &exchange{}
	path, query, hasQuery := strings.Cut(h.target, "?")
	x.url = url.URL{Path: path, RawQuery: query, ForceQuery: hasQuery && query == ""}
	ctx, cancel := context.WithCancel(c.ctx)
	x.cancel = cancel
	defer cancel()
	c.current = x
	defer func() { c.current = nil }()
	req := (&http.Request{
		Method: h.method, URL: &x.url, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h.header, Host: h.host, RemoteAddr: c.remoteAddr, RequestURI: h.target,
		ContentLength: h.contentLength, Close: h.close, Body: http.NoBody, TLS: c.tlsState,
	}).WithContext(ctx)
	if h.contentLength > 0 {
		x.body = body{c: c, remaining: h.contentLength}
		req.Body = &x.body
	} else {
		x.body.done.Store(true)
	}
	w := &x.w
	w.init(c, req)

	c.watch(x)
	completed := c.runHandler(w, req)
	c.unwatch()
	if !completed {
		// A panic: what was committed goes out, the rest is dropped, and the connection
		// closes, so the client sees the response cut rather than complete.
		_ = c.bw.Flush()
		return false
	}
	return c.finish(x)
}

// runHandler calls the handler; false when it panicked.
func (c *conn) runHandler(w http.ResponseWriter, req *http.Request) (completed bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.logf("leanserver: panic serving %v: %v\n%s", c.remoteAddr, v, buf)
			}
			completed = false
		}
	}()
	c.s.Handler.ServeHTTP(w, req)
	return true
}

// finish completes the response after its handler returned and reads what the handler
// left of the request body; false when the connection is to be closed.
func (c *conn) finish(x *exchange) bool {
	b, w := &x.body, &x.w
	b.mu.Lock()
	rest := b.remaining
	b.closed = true // a handler that kept the body cannot read the next request
	b.mu.Unlock()
	if rest > int64(c.br.Buffered())+maxDiscard {
		w.closeAfter = true
	}
	if err := w.finish(); err != nil || w.closeAfter || c.s.closing.Load() {
		return false
	}
	if rest > 0 {
		if rest > int64(c.br.Buffered()) {
			_ = c.nc.SetReadDeadline(time.Now().Add(discardTimeout))
			defer func() { _ = c.nc.SetReadDeadline(time.Time{}) }()
		}
		if _, err := c.br.Discard(int(rest)); err != nil {
			return false
		}
	}
	return true
}

// body is a usual request's body: the next ContentLength bytes of the connection.
type body struct {
	c         *conn
	mu        sync.Mutex
	remaining int64
	closed    bool
	err       error
	done      atomic.Bool // read to its end: the connection may be watched
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.remaining == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.c.br.Read(p)
	b.remaining -= int64(n)
	switch {
	case b.remaining == 0:
		b.done.Store(true)
		err = io.EOF
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
	}
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
		b.c.failed()
	}
	return n, err
}

// Close ends the handler's reading; what is left is read (or the connection closed)
// after the handler returns, as net/http does.
func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// failed marks the connection broken by a failed read of a request body: it is not kept.
func (c *conn) failed() { c.state.Store(stateClosed) }
