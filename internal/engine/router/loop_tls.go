package router

import (
	"crypto/tls"
	"errors"
	"net"

	"github.com/panjf2000/gnet/v2"
)

// TLS on the event loops. A connection's handshake runs on a goroutine of its own, over
// the socket, through the lean server's Handshake (net/http's rules: the header timeout,
// the 400 to plain HTTP, failures reported). The connection then joins a loop, and its
// *tls.Conn stays: crypto/tls's record layer reads the ciphertext the loop hands it and
// writes the ciphertext the loop sends (loopCipher), so a request costs no goroutine
// wake-up over TLS either. A connection the loops hand off takes its *tls.Conn along,
// back on a socket.

// tlsClient is the TLS side of a client connection served on a loop.
type tlsClient struct {
	tc    *tls.Conn
	wire  *loopCipher
	state *tls.ConnectionState
	// plain is what crypto/tls decrypted and the loop has not consumed yet.
	plain byteQueue
}

// maxDecrypted bounds what a client's pump decrypts ahead of the request it serves: the
// largest request the loops serve whole, and a head's worth more. Beyond it the
// ciphertext waits, as the plain path leaves bytes in gnet's buffer.
const maxDecrypted = maxBufferedBody + 64<<10

// handshake runs a new connection's TLS handshake and gives the connection to a loop,
// or to the lean server when it negotiated another protocol than HTTP/1.1 (HTTP/2 by
// ALPN). It runs on a goroutine of its own.
func (s *LoopServer) handshake(nc net.Conn) {
	defer s.handshakes.Done()
	wire := &loopCipher{Conn: nc}
	tc := tls.Server(wire, s.TLSConfig)
	remote := nc.RemoteAddr().String()
	state, ok := s.Fallback.Handshake(s.ctx, tc, remote)
	if !ok {
		_ = nc.Close()
		return
	}
	if p := state.NegotiatedProtocol; p != "" && p != "http/1.1" {
		s.handedOff.Add(1)
		s.handoff.push(tc)
		return
	}
	// From here on the loop feeds crypto/tls; EnrollContext closes nc, keeping a
	// duplicate of its descriptor.
	wire.onLoop = true
	lc := &loopClient{remote: remote, tls: &tlsClient{tc: tc, wire: wire, state: state}}
	s.enroll(nc, lc)
}

// pump moves the bytes the loop read of lc into crypto/tls and decrypts what it can, up
// to maxDecrypted, then sends what crypto/tls wrote meanwhile (a key update's answer).
// An error other than running out of bytes (a bad record, the client's close_notify)
// ends the connection.
func (t *tlsClient) pump(c gnet.Conn) error {
	if buf, _ := c.Next(-1); len(buf) > 0 {
		t.wire.in.write(buf)
	}
	var err error
	for t.plain.len() < maxDecrypted {
		var n int
		n, err = t.tc.Read(t.plain.spare(16 << 10))
		t.plain.grow(n)
		if err != nil {
			break
		}
	}
	if ferr := t.flush(c); ferr != nil {
		return ferr
	}
	if errors.Is(err, errLoopEmpty) {
		return nil
	}
	return err
}

// write encrypts b and sends it on c.
func (t *tlsClient) write(c gnet.Conn, b []byte) error {
	if _, err := t.tc.Write(b); err != nil {
		return err
	}
	return t.flush(c)
}

// flush sends what crypto/tls wrote.
func (t *tlsClient) flush(c gnet.Conn) error {
	if len(t.wire.out) == 0 {
		return nil
	}
	_, err := c.Write(t.wire.out)
	t.wire.out = t.wire.out[:0]
	return err
}

// buffered reports whether lc holds bytes of a next request, decrypted or not.
func (t *tlsClient) buffered() bool { return t.plain.len() > 0 || t.wire.in.len() > 0 }

// handOff gives t's connection to the lean server on the socket fd (a duplicate of the
// loop's), with what the loop read and crypto/tls did not, and what it decrypted and the
// loop did not serve.
func (t *tlsClient) handOff(c gnet.Conn, fd int) (net.Conn, error) {
	nc, err := fileConn(fd)
	if err != nil {
		return nil, err
	}
	if buf, _ := c.Peek(-1); len(buf) > 0 {
		t.wire.in.write(buf)
	}
	t.wire.Conn, t.wire.onLoop = nc, false
	pending := append([]byte(nil), t.plain.bytes()...)
	return &handedTLSConn{prefixedConn: prefixedConn{Conn: t.tc, pending: pending}, state: *t.state}, nil
}

// handedTLSConn is a TLS connection the loops handed to the lean server: its handshake
// is done, and the lean server gives every request its state.
type handedTLSConn struct {
	prefixedConn
	state tls.ConnectionState
}

// ConnectionState is the connection's TLS state, as of its handshake.
func (c *handedTLSConn) ConnectionState() tls.ConnectionState { return c.state }

// loopCipher is the connection crypto/tls reads and writes records on. During the
// handshake, and after a hand-off, it is the socket (Conn), after whatever the loop read
// and crypto/tls has not (in). On the loop it is two buffers: in, which the loop fills
// from the socket and which, once empty, answers errLoopEmpty (a temporary error, which
// crypto/tls keeps no record of), and out, which the loop sends.
type loopCipher struct {
	net.Conn
	onLoop bool
	in     byteQueue
	out    []byte
}

func (w *loopCipher) Read(p []byte) (int, error) {
	if w.in.len() > 0 {
		return w.in.read(p), nil
	}
	if w.onLoop {
		return 0, errLoopEmpty
	}
	return w.Conn.Read(p)
}

func (w *loopCipher) Write(p []byte) (int, error) {
	if w.onLoop {
		w.out = append(w.out, p...)
		return len(p), nil
	}
	return w.Conn.Write(p)
}

// CloseWrite half-closes the socket, for crypto/tls's CloseWrite after a hand-off.
func (w *loopCipher) CloseWrite() error {
	if cw, ok := w.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// errLoopEmpty is loopCipher's read when the loop has handed crypto/tls everything it
// read: a temporary net.Error, so crypto/tls keeps its state and the next read goes on
// from there.
var errLoopEmpty error = loopEmpty{}

type loopEmpty struct{}

func (loopEmpty) Error() string   { return "no more bytes read on the event loop" }
func (loopEmpty) Timeout() bool   { return true }
func (loopEmpty) Temporary() bool { return true }

// byteQueue is a buffer read from the front and written at the back, reusing its space
// once it is empty.
type byteQueue struct {
	b []byte
	r int
}

func (q *byteQueue) len() int      { return len(q.b) - q.r }
func (q *byteQueue) bytes() []byte { return q.b[q.r:] }

func (q *byteQueue) discard(n int) {
	q.r += n
	if q.r >= len(q.b) {
		q.b, q.r = q.b[:0], 0
	}
}

func (q *byteQueue) read(p []byte) int {
	n := copy(p, q.bytes())
	q.discard(n)
	return n
}

func (q *byteQueue) write(p []byte) {
	q.compact()
	q.b = append(q.b, p...)
}

// spare returns at least n bytes of room after the queue's end, for grow to take in.
func (q *byteQueue) spare(n int) []byte {
	q.compact()
	if cap(q.b)-len(q.b) < n {
		q.b = append(q.b[:len(q.b):len(q.b)], make([]byte, n)...)[:len(q.b)]
	}
	return q.b[len(q.b):cap(q.b)]
}

// grow takes n bytes written into spare's room into the queue.
func (q *byteQueue) grow(n int) { q.b = q.b[:len(q.b)+n] }

// compact moves the unread bytes to the front when that frees room.
func (q *byteQueue) compact() {
	if q.r > 0 {
		n := copy(q.b, q.b[q.r:])
		q.b, q.r = q.b[:n], 0
	}
}
