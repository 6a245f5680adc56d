package router

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/panjf2000/gnet/v2"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/gnetlog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
)

// LoopServer serves the router on event loops (github.com/panjf2000/gnet/v2): each loop
// reads its client connections and its instance connections itself, so a usual scoring
// request costs no goroutine wake-up at all, where a server on Go's net package pays one
// each way. On a loopback backend that is most of a proxy's cost: a proxy on the net
// package that only copies bytes stays below nginx's requests per second, one on these
// loops passes it (tools/bench -mode router prints both floors).
//
// The loops serve a request themselves when it is usual for the lean server
// (leanserver.ParseRequest), arrived whole (head and body, at most maxBufferedBody), is
// routed to an endpoint that mirrors nothing and whose instances speak plain HTTP, and
// carries a valid credential (and a pin, if any, naming a deployment). The routing, the
// limits, the request timeout, the retry on another instance, the resend of an idempotent
// request on a fresh connection, the headers and the statistics are the router's, as on
// its own client path (forward.go). Anything else is handed off before any of it is
// decided: the connection, with what was read of it, goes to Fallback, a lean server
// running the router as its handler, which serves it to its end.
type LoopServer struct {
	Router *Router
	// Fallback serves the connections handed off; its Handler is the router (possibly
	// wrapped, for metrics). Without a Clock of its own it gets the router's.
	Fallback *leanserver.Server
	// Observe, when set, is told of every request the loops answered, as the metrics
	// middleware around Fallback's handler is told of the others.
	Observe func(endpoint, deployment string, status int, elapsed time.Duration)
	Logger  hclog.Logger
	// Loops is the number of event loops; zero means GOMAXPROCS.
	Loops int
	// TLSConfig, when set, makes Serve's listener a TLS one: Serve takes the plain TCP
	// listener, runs each connection's handshake (Fallback.Handshake: its
	// ReadHeaderTimeout and HandshakeFailed apply), and the loops serve the connection
	// over TLS (loop_tls.go).
	TLSConfig *tls.Config

	log      hclog.Logger
	cli      *gnet.Client
	handoff  *handoffListener
	ctx      context.Context // ends with Close: cancels dials
	cancel   context.CancelFunc
	ln       net.Listener
	stopping atomic.Bool
	stopped  chan struct{} // closed when stopping begins: ends a pause between accepts
	// handshakes counts the TLS handshakes under way, each on its own goroutine.
	handshakes sync.WaitGroup
	active     atomic.Int64 // exchanges in flight on the loops
	// drained gets a token when the last exchange in flight ends while stopping, for
	// Shutdown to look at active again.
	drained chan struct{}
	// served and handedOff count the requests the loops answered and the connections
	// they handed off.
	served, handedOff atomic.Int64
	// onHandOff, set by tests, is called once a connection was handed to the lean server.
	onHandOff func()

	mu    sync.Mutex
	loops map[gnet.EventLoop]*loopState
	done  chan struct{} // closed when Serve returns
}

// loopState is one event loop's own: touched only on that loop.
type loopState struct {
	el        gnet.EventLoop
	idle      map[*connPool][]*loopUpstream
	clients   map[*loopClient]struct{}
	deadlines deadlines
}

// loopClient is a client connection served on a loop.
type loopClient struct {
	c      gnet.Conn
	loop   *loopState
	remote string
	x      *loopExchange // the request in flight, if any
	// closeAfter: close once the response in flight is out (the client asked, or the
	// server is stopping).
	closeAfter bool
	// out, msg and body are reused for each request: the response bytes being written,
	// the request as the instance gets it, and its body.
	out, msg, body []byte
	// tls is the connection's TLS, nil for plain HTTP.
	tls *tlsClient
}

// loopUpstream is a connection to an instance, owned by one loop.
type loopUpstream struct {
	c    gnet.Conn // nil until the dial completed
	loop *loopState
	in   *instance
	x    *loopExchange // the exchange it carries, nil when idle
	// cancelDial ends the dial under way (c still nil) when its request ends first.
	cancelDial context.CancelFunc
	reused     bool // it carried an earlier request
	gotBytes   bool // the instance sent something for x
	idleSince  time.Time
}

// Serve accepts connections on ln and serves them until Shutdown or Close; it returns
// the error that ended accepting (net.ErrClosed after either).
func (s *LoopServer) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.stopping.Load() {
		s.mu.Unlock()
		return net.ErrClosed
	}
	err := s.start(ln)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	defer close(s.done)
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.stopping.Load() {
				return net.ErrClosed
			}
			var temporary bool
			if delay, temporary = leanserver.AcceptRetryDelay(err, delay); temporary {
				s.log.Warn("accept error, retrying", "error", err, "delay", delay)
				s.pause(delay)
				continue
			}
			return err
		}
		delay = 0
		if s.TLSConfig != nil {
			s.handshakes.Add(1)
			go s.handshake(nc)
			continue
		}
		s.enroll(nc, &loopClient{remote: nc.RemoteAddr().String()})
	}
}

// enroll gives the client connection nc to a loop.
func (s *LoopServer) enroll(nc net.Conn, lc *loopClient) {
	if _, err := s.cli.EnrollContext(nc, lc); err != nil {
		// EnrollContext closed nc; the loops are stopping, or out of descriptors.
		s.log.Warn("cannot serve a scoring connection", "error", err)
	}
}

func (s *LoopServer) start(ln net.Listener) error {
	if s.Router == nil || s.Fallback == nil {
		return errors.New("router: LoopServer needs a Router and a Fallback")
	}
	s.log = s.Logger
	if s.log == nil {
		s.log = hclog.NewNullLogger()
	}
	s.log = s.log.Named("scoring-loops")
	loops := s.Loops
	if loops <= 0 {
		loops = runtime.GOMAXPROCS(0)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.done = make(chan struct{})
	s.stopped = make(chan struct{})
	s.drained = make(chan struct{}, 1)
	s.ln = ln
	s.handoff = newHandoffListener(ln.Addr())
	cli, err := gnet.NewClient(s, gnet.WithMulticore(true), gnet.WithNumEventLoop(loops),
		gnet.WithLogger(gnetlog.New(s.log)))
	if err == nil {
		err = cli.Start()
	}
	if err != nil {
		return err
	}
	s.cli = cli
	if s.Fallback.Clock == nil {
		s.Fallback.Clock = s.Router.clock
	}
	go func() { _ = s.Fallback.Serve(s.handoff) }()
	return nil
}

// Shutdown stops accepting, closes idle connections, lets the requests in flight finish
// (each answered with Connection: close) until ctx ends, then closes everything.
func (s *LoopServer) Shutdown(ctx context.Context) error {
	if !s.beginStop() {
		return nil
	}
	_ = s.ln.Close()
	s.eachLoop(func(l *loopState) {
		for lc := range l.clients {
			if lc.x == nil {
				_ = lc.c.Close()
			} else {
				lc.closeAfter = true
			}
		}
	})
	fallbackDone := make(chan error, 1)
	go func() { fallbackDone <- s.Fallback.Shutdown(ctx) }()
	var err error
	for s.active.Load() > 0 && err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-s.drained: // finish saw the last exchange end: look again
		}
	}
	s.stopLoops()
	if ferr := <-fallbackDone; err == nil {
		err = ferr
	}
	return err
}

// Close closes the listener and every connection at once.
func (s *LoopServer) Close() error {
	if !s.beginStop() {
		return nil
	}
	_ = s.ln.Close()
	s.stopLoops()
	return s.Fallback.Close()
}

// beginStop marks the server stopping; false when it was already, or never served.
func (s *LoopServer) beginStop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopping.CompareAndSwap(false, true) || s.cli == nil {
		return false
	}
	close(s.stopped)
	return true
}

// pause waits d on the router's clock, or until the server is stopping.
func (s *LoopServer) pause(d time.Duration) {
	t := s.Router.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-s.stopped:
	}
}

// exchangeEnded counts an exchange out of active; the last one to end while the server
// is stopping tells Shutdown.
func (s *LoopServer) exchangeEnded() {
	if s.active.Add(-1) == 0 && s.stopping.Load() {
		select {
		case s.drained <- struct{}{}:
		default: // a token is already waiting
		}
	}
}

func (s *LoopServer) stopLoops() {
	<-s.done
	s.cancel() // ends the handshakes under way too
	s.handshakes.Wait()
	s.eachLoop(func(l *loopState) { l.deadlines.stop() })
	_ = s.cli.Stop()
	s.handoff.close()
}

// eachLoop runs f on every loop that has served a connection, and waits for it.
func (s *LoopServer) eachLoop(f func(*loopState)) {
	s.mu.Lock()
	loops := make([]*loopState, 0, len(s.loops))
	for _, l := range s.loops {
		loops = append(loops, l)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Add(1)
		err := l.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			defer wg.Done()
			f(l)
			return nil
		}))
		if err != nil {
			wg.Done()
		}
	}
	wg.Wait()
}

// loopOf returns the state of the loop el.
func (s *LoopServer) loopOf(el gnet.EventLoop) *loopState {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.loops[el]
	if l == nil {
		if s.loops == nil {
			s.loops = map[gnet.EventLoop]*loopState{}
		}
		l = &loopState{el: el, idle: map[*connPool][]*loopUpstream{}, clients: map[*loopClient]struct{}{}}
		l.deadlines = deadlines{clock: s.Router.clock, fire: func() {
			// On the timer's goroutine: the expired requests end on the loop.
			_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				for _, x := range l.deadlines.expired() {
					s.timeout(x)
				}
				return nil
			}))
		}}
		s.loops[el] = l
	}
	return l
}

// OnBoot, OnShutdown and OnTick: nothing to do.
func (s *LoopServer) OnBoot(gnet.Engine) gnet.Action       { return gnet.None }
func (s *LoopServer) OnShutdown(gnet.Engine)               {}
func (s *LoopServer) OnTick() (time.Duration, gnet.Action) { return time.Hour, gnet.None }

// OnOpen runs on the loop when a client connection was enrolled or an instance
// connection dialled.
func (s *LoopServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	switch v := c.Context().(type) {
	case *loopClient:
		v.c, v.loop = c, s.loopOf(c.EventLoop())
		v.loop.clients[v] = struct{}{}
		if s.stopping.Load() {
			return nil, gnet.Close
		}
		if v.tls != nil {
			// crypto/tls may hold the first request already, read with the end of the
			// handshake: no traffic would come for it.
			_ = c.Wake(nil)
		}
	case *loopUpstream:
		v.c = c
		x := v.x
		if x == nil || x.done || x.up != v {
			return nil, gnet.Close // the request ended while the dial was under way
		}
		return x.msg, gnet.None
	}
	return nil, gnet.None
}

// OnTraffic runs on the loop when a connection has bytes to read.
func (s *LoopServer) OnTraffic(c gnet.Conn) gnet.Action {
	switch v := c.Context().(type) {
	case *loopClient:
		if v.x != nil {
			return gnet.None // a pipelined request waits for the one in flight
		}
		if v.tls != nil {
			if err := v.tls.pump(c); err != nil {
				return gnet.Close
			}
		}
		return s.serveNext(v)
	case *loopUpstream:
		return s.upstreamTraffic(v)
	}
	return gnet.Close
}

// OnClose runs on the loop when a connection closed, either side first.
func (s *LoopServer) OnClose(c gnet.Conn, _ error) gnet.Action {
	switch v := c.Context().(type) {
	case *loopClient:
		if v.loop != nil {
			delete(v.loop.clients, v)
		}
		if x := v.x; x != nil && !x.done {
			s.clientGone(x)
		}
	case *loopUpstream:
		s.upstreamClosed(v)
	}
	return gnet.None
}

// handOff gives the client connection, and what was read of it, to the lean server. It
// runs in the connection's own OnTraffic, whose gnet.Close it returns: the loop then
// closes its descriptor and reads nothing more, while the lean server reads a duplicate.
func (s *LoopServer) handOff(lc *loopClient) gnet.Action {
	if lc.c.OutboundBuffered() > 0 {
		// The last response is still going out, and a descriptor closed now would drop
		// the rest of it: look again shortly. gnet says nothing when its outbound buffer
		// drains, so this polls, on the router's clock like every other wait here (a
		// fake clock holds the hand-off until it is stepped).
		s.Router.clock.AfterFunc(time.Millisecond, func() { _ = lc.c.Wake(nil) })
		return gnet.None
	}
	nc, err := lc.handOff()
	if err != nil {
		s.log.Warn("cannot hand a connection to the lean server, closing it", "error", err)
		return gnet.Close
	}
	s.handedOff.Add(1)
	s.handoff.push(nc)
	if s.onHandOff != nil {
		s.onHandOff()
	}
	return gnet.Close
}

// handOff returns lc's connection for the lean server: a duplicate of the loop's socket,
// which reads first what the loop read and did not serve.
func (lc *loopClient) handOff() (net.Conn, error) {
	fd, err := lc.c.Dup()
	if err != nil {
		return nil, err
	}
	if lc.tls != nil {
		return lc.tls.handOff(lc.c, fd)
	}
	buf, _ := lc.c.Peek(-1)
	pending := append([]byte(nil), buf...)
	nc, err := fileConn(fd)
	if err != nil {
		return nil, err
	}
	return &prefixedConn{Conn: nc, pending: pending}, nil
}

// fileConn is a net.Conn of socket fd, a duplicate of a loop's: the lean server's
// connection of a client the loops hand off (net.FileConn duplicates fd again, so the
// file is closed here).
func fileConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "scoring-client")
	nc, err := net.FileConn(f)
	_ = f.Close()
	return nc, err
}

// peek returns the request bytes lc holds: what the loop read, or with TLS what
// crypto/tls decrypted.
func (lc *loopClient) peek() []byte {
	if lc.tls != nil {
		return lc.tls.plain.bytes()
	}
	buf, _ := lc.c.Peek(-1)
	return buf
}

// discard drops n bytes of peek's.
func (lc *loopClient) discard(n int) {
	if lc.tls != nil {
		lc.tls.plain.discard(n)
		return
	}
	_, _ = lc.c.Discard(n)
}

// write sends b to the client (a failed write closes lc at once: clientGone ends its
// exchange).
func (lc *loopClient) write(b []byte) {
	if lc.tls != nil {
		if err := lc.tls.write(lc.c, b); err != nil {
			_ = lc.c.Close()
		}
		return
	}
	_, _ = lc.c.Write(b)
}

// buffered reports whether lc holds bytes of a next request.
func (lc *loopClient) buffered() bool {
	return lc.c.InboundBuffered() > 0 || (lc.tls != nil && lc.tls.buffered())
}

// takeIdle returns an idle connection to in, or nil. A connection idle for longer than
// idleConnTimeout is closed, with every older one; a closed pool (the instance left the
// table) keeps none.
func (l *loopState) takeIdle(in *instance, now time.Time) *loopUpstream {
	idle := l.idle[in.pool]
	n := len(idle)
	if n == 0 {
		return nil
	}
	up := idle[n-1]
	idle[n-1] = nil
	idle = idle[:n-1]
	l.idle[in.pool] = idle
	if now.Sub(up.idleSince) < idleConnTimeout && !in.pool.isClosed() {
		return up
	}
	l.dropIdle(in.pool)
	_ = up.c.Close()
	return nil
}

// putIdle keeps up for reuse, or closes it when its pool is closed or full.
func (l *loopState) putIdle(up *loopUpstream, now time.Time) {
	idle := l.idle[up.in.pool]
	if len(idle) >= maxIdlePerInstance || up.in.pool.isClosed() {
		_ = up.c.Close()
		return
	}
	up.idleSince, up.reused = now, true
	l.idle[up.in.pool] = append(idle, up)
}

// dropIdle closes every idle connection of a pool on this loop.
func (l *loopState) dropIdle(p *connPool) {
	for _, up := range l.idle[p] {
		up.x = nil
		_ = up.c.Close()
	}
	delete(l.idle, p)
}

// removeIdle forgets up, which the instance closed while it was idle.
func (l *loopState) removeIdle(up *loopUpstream) {
	idle := l.idle[up.in.pool]
	for i, u := range idle {
		if u == up {
			l.idle[up.in.pool] = append(idle[:i], idle[i+1:]...)
			return
		}
	}
}

// handoffListener is the lean server's listener for the connections handed off.
type handoffListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *handoffListener) push(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) close()         { l.once.Do(func() { close(l.done) }) }
func (l *handoffListener) Close() error   { l.close(); return nil }
func (l *handoffListener) Addr() net.Addr { return l.addr }

// prefixedConn reads pending before the connection: the bytes the loop had read.
type prefixedConn struct {
	net.Conn
	pending []byte
}

func (c *prefixedConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite lets a server half-close the connection, as it does a *net.TCPConn.
func (c *prefixedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
