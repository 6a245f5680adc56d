package leanserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Server serves HTTP/1.1 on a listener: the usual request itself, every other connection
// through an embedded net/http server with the same handler and timeouts. Set its fields
// before Serve; a Server serves one listener.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds the reading of a request head; zero is no limit.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive connection; zero
	// is no limit.
	IdleTimeout time.Duration
	// ErrorLog receives handler panics and accept errors; nil is the log package's.
	ErrorLog *log.Logger
	// HandshakeFailed, when set, receives each failed TLS handshake (on a listener that
	// accepts *tls.Conn): the client's address and crypto/tls's error, or ErrPlainHTTP
	// for a client that spoke plain HTTP. Neither holds a secret. nil logs it to ErrorLog
	// as net/http does.
	HandshakeFailed func(remoteAddr string, err error)
	// Clock times the watch of a running request for its client going away, the pause
	// after a failed accept and the Date header; nil is the real clock. The read
	// deadlines (ReadHeaderTimeout, IdleTimeout) are the socket's and run on the wall
	// clock: the kernel knows no other.
	Clock clock.WithDelayedExecution

	mu       sync.Mutex
	ln       net.Listener
	conns    map[*conn]struct{}
	fallback *http.Server
	handoff  *handoffListener
	closing  atomic.Bool
	handoffs atomic.Int64   // connections handed to the fallback, for tests
	served   sync.WaitGroup // the fallback's Serve
	clock    clock.WithDelayedExecution
	// onWatch, set by tests, is called each time the watch of a request has looked at
	// its connection (watch.go).
	onWatch func()
	// connGone gets a token when a connection ends while the server is closing, for
	// Shutdown to look again.
	connGone chan struct{}
}

// Serve accepts connections on ln until Shutdown or Close, and returns
// http.ErrServerClosed then (or the listener's error).
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		_ = ln.Close()
		return http.ErrServerClosed
	}
	if s.ln != nil {
		s.mu.Unlock()
		return errors.New("leanserver: Serve called twice")
	}
	s.ln = ln
	s.conns = map[*conn]struct{}{}
	s.clock = s.Clock
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	s.connGone = make(chan struct{}, 1)
	s.handoff = &handoffListener{addr: ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	s.fallback = &http.Server{
		Handler: withTLSState(s.Handler), ReadHeaderTimeout: s.ReadHeaderTimeout, IdleTimeout: s.IdleTimeout,
		ErrorLog: s.ErrorLog, ConnContext: handedOffTLSState,
	}
	s.served.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.served.Done()
		_ = s.fallback.Serve(s.handoff)
	}()

	base := context.WithValue(context.Background(), http.ServerContextKey, s.fallback)
	var delay time.Duration // after a temporary accept error, as net/http does
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			var temporary bool
			if delay, temporary = AcceptRetryDelay(err, delay); temporary {
				s.logf("leanserver: accept error: %v; retrying in %v", err, delay)
				s.pause(delay)
				continue
			}
			return err
		}
		delay = 0
		c := newConn(s, nc, base)
		if !s.track(c, true) {
			_ = nc.Close()
			return http.ErrServerClosed
		}
		go c.serve()
	}
}

// AcceptRetryDelay returns how long to wait before accepting again after err, the last
// wait having been delay (zero after a success), and false when err is not temporary and
// accepting should end. As net/http does, the wait doubles from 5 ms up to a second.
func AcceptRetryDelay(err error, delay time.Duration) (time.Duration, bool) {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return 0, false
	}
	return min(max(2*delay, 5*time.Millisecond), time.Second), true
}

// pause waits d on the server's clock, or until the server is closing.
func (s *Server) pause(d time.Duration) {
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-s.handoff.done:
	}
}

// track adds or removes c from the connections Shutdown and Close see; adding fails once
// the server is closing.
func (s *Server) track(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, c)
		if s.closing.Load() {
			select {
			case s.connGone <- struct{}{}:
			default: // a token is already waiting
			}
		}
		return true
	}
	if s.closing.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// handOff gives nc, with what was read of it but not consumed, to the net/http server.
// tlsState is the connection's TLS state, nil when it is not TLS.
func (s *Server) handOff(nc net.Conn, br *bufio.Reader, tlsState *tls.ConnectionState) {
	s.handoffs.Add(1)
	if br.Buffered() > 0 || tlsState != nil {
		nc = &bufferedConn{Conn: nc, br: br, tls: tlsState}
	}
	select {
	case s.handoff.conns <- nc:
	case <-s.handoff.done:
		_ = nc.Close()
	}
}

// Shutdown stops accepting connections, closes idle ones, lets requests in flight finish
// (their responses say Connection: close), and returns when every connection is closed
// or ctx ends, as http.Server.Shutdown does.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClose()
	fallbackDone := make(chan error, 1)
	go func() {
		if s.fallback == nil {
			fallbackDone <- nil
			return
		}
		fallbackDone <- s.fallback.Shutdown(ctx)
	}()
	// A connection busy now closes itself once its request is answered (the server is
	// closing); each that ends sends Shutdown to look again.
	for !s.closeIdle() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.connGone:
		}
	}
	return <-fallbackDone
}

// Close closes the listener and every connection at once, as http.Server.Close does.
func (s *Server) Close() error {
	s.beginClose()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	var err error
	if s.fallback != nil {
		err = s.fallback.Close()
	}
	return err
}

// beginClose marks the server closing and closes its listeners.
func (s *Server) beginClose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Swap(true) {
		return
	}
	if s.ln != nil {
		_ = s.ln.Close()
		s.handoff.close()
	}
}

// closeIdle closes the connections waiting for a request and reports whether none is
// left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			_ = c.nc.Close()
		}
	}
	return len(s.conns) == 0
}

// tlsStateKey is the context key of a handed-off connection's TLS state.
type tlsStateKey struct{}

// handedOffTLSState is the net/http server's ConnContext: it keeps the TLS state of a
// handed-off TLS connection for withTLSState.
func handedOffTLSState(ctx context.Context, nc net.Conn) context.Context {
	if bc, ok := nc.(*bufferedConn); ok && bc.tls != nil {
		return context.WithValue(ctx, tlsStateKey{}, bc.tls)
	}
	return ctx
}

// withTLSState is h for the net/http server: a request on a handed-off TLS connection
// gets its Request.TLS, as net/http sets it on a *tls.Conn of its own. A nil h is
// http.DefaultServeMux, as for net/http.
func withTLSState(h http.Handler) http.Handler {
	if h == nil {
		h = http.DefaultServeMux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
				r.TLS = st
			}
		}
		h.ServeHTTP(w, r)
	})
}

// handshakeFailed reports a failed TLS handshake.
func (s *Server) handshakeFailed(remoteAddr string, err error) {
	if s.HandshakeFailed != nil {
		s.HandshakeFailed(remoteAddr, err)
		return
	}
	s.logf("http: TLS handshake error from %s: %v", remoteAddr, err)
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// handoffListener is the net/http server's listener: it "accepts" the connections the
// lean server hands off.
type handoffListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.close()
	return nil
}

func (l *handoffListener) close() { l.once.Do(func() { close(l.done) }) }

func (l *handoffListener) Addr() net.Addr { return l.addr }

// bufferedConn is a connection whose first bytes were already read into br. tls is its
// TLS state when it is a *tls.Conn whose handshake the lean server did: net/http, which
// sees this wrapper and not the *tls.Conn, gets it through handedOffTLSState.
type bufferedConn struct {
	net.Conn
	br  *bufio.Reader
	tls *tls.ConnectionState
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.br != nil {
		if c.br.Buffered() > 0 {
			return c.br.Read(p)
		}
		c.br = nil
	}
	return c.Conn.Read(p)
}

// CloseWrite lets net/http half-close the connection before closing it, as it does on a
// *net.TCPConn, so a client still sending gets the response rather than a reset.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
