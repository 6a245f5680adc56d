package router

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
)

// loopExchange is one request the loops serve, from routing to the end of its response.
// Everything about it runs on its client's loop.
type loopExchange struct {
	lc         *loopClient
	req        http.Request
	url        url.URL
	endpoint   string
	suffix     string
	dep        *deploymentState
	in         *instance // the instance holding the request's slot
	requestID  string
	idBuf      [36]byte
	body       []byte
	msg        []byte // the request as the instance gets it
	idempotent bool
	start      time.Time // also the time an idle instance connection is judged by
	end        time.Time
	// deadline is when the request timeout ends it; prev and next link it into its
	// loop's deadline queue (loop_deadlines.go).
	deadline   time.Time
	prev, next *loopExchange
	queue      *deadlineQueue

	up       *loopUpstream // the instance connection carrying it (dialling, or open)
	head     responseHead
	headSent bool // the response head went to the client
	chunks   chunkScanner
	sent     int64 // framingLength: body bytes passed on

	err                *Error // the router's own answer, given without an instance
	status             int    // what the client got; 0 when it went away
	retried, resent    bool
	timedOut, canceled bool
	done               bool
}

var (
	errResponseHeadTooLarge = errors.New("response head larger than 1 MiB")
	errMalformedResponse    = errors.New("malformed response head")
	errConnectionClosed     = errors.New("the instance closed the connection before answering")
)

// maxResponseHead bounds an instance's response head, as http.Transport's default.
const maxResponseHead = 1 << 20

// serveNext serves the requests buffered on lc, one at a time: it returns once one is in
// flight, none is left, or the connection was handed off or is to be closed (the action
// of lc's OnTraffic).
func (s *LoopServer) serveNext(lc *loopClient) gnet.Action {
	for lc.x == nil {
		if lc.closeAfter {
			return gnet.Close
		}
		buf := lc.peek()
		if len(buf) == 0 {
			return gnet.None
		}
		if s.stopping.Load() {
			return gnet.Close
		}
		end := leanserver.HeadEnd(buf)
		if end < 0 {
			// A head in pieces: the lean server waits for the rest, under its
			// ReadHeaderTimeout.
			return s.handOff(lc)
		}
		x := &loopExchange{lc: lc}
		req := &x.req
		if !leanserver.ParseRequest(buf[:end], lc.remote, req, &x.url) ||
			req.ContentLength > maxBufferedBody || int64(len(buf)-end) < req.ContentLength {
			return s.handOff(lc)
		}
		if lc.tls != nil {
			req.TLS = lc.tls.state
		}
		n := end + int(req.ContentLength)
		if !s.route(x) {
			return s.handOff(lc)
		}
		if req.ContentLength > 0 && !x.done {
			// The client's buffer: it sends its next request only after this one's answer.
			lc.body = append(lc.body[:0], buf[end:n]...)
			x.body = lc.body
		}
		lc.discard(n)
		if req.Close {
			lc.closeAfter = true
		}
		if x.done {
			s.answer(x) // answered by the router itself: on to the next request
			continue
		}
		lc.x = x
		s.begin(x)
	}
	return gnet.None
}

// route decides where x's request goes, as Router.ServeHTTP does, or reports false when
// the lean server is to serve it: anything but a routable request with a valid
// credential, to an endpoint whose requests the loops serve. Routed, x holds an instance
// slot, or is done with the router's own answer in err (503, 429).
func (s *LoopServer) route(x *loopExchange) bool {
	r, req := s.Router, &x.req
	name, suffix, ok := splitScoringPath(req.URL.Path)
	if !ok {
		return false
	}
	ep := r.table.Load().endpoints[name]
	if ep == nil || !ep.loopable || !plainQuery(req.URL.RawQuery) ||
		!ep.authorize(headerValue(req.Header, "Authorization")) {
		return false
	}
	pinned := headerValue(req.Header, canonicalDeploymentHeader)
	var dep *deploymentState
	if pinned != "" {
		if dep = ep.deployments[pinned]; dep == nil {
			return false // the lean server's 404 lists the deployments
		}
	}
	x.endpoint, x.suffix, x.start = name, suffix, r.clock.Now()
	x.requestID = requestID(headerValue(req.Header, canonicalRequestIDHeader), &x.idBuf)
	if dep == nil {
		if dep = ep.pick(r.rand()); dep == nil {
			x.err, x.done = errNoTraffic(name), true
			return true
		}
	}
	in := dep.acquire(nil)
	if in == nil && dep.hold != nil {
		return false // held on the lean server, which counts it
	}
	x.dep = dep
	st := dep.stats
	st.requests.Add(1)
	if in == nil {
		if len(dep.ready) == 0 {
			x.err = errNoReadyInstance(dep)
		} else {
			st.rejected.Add(1)
			x.err = errBusy(dep)
		}
		st.observe(x.err.Status)
		x.done = true
		return true
	}
	x.in = in
	x.idempotent = idempotent(req)
	return true
}

// answer sends the router's own answer to an exchange that never held an instance slot.
func (s *LoopServer) answer(x *loopExchange) {
	x.status, x.headSent, x.end = x.err.Status, true, s.Router.clock.Now()
	s.writeError(x, x.err)
	s.observe(x)
}

// writeError writes e as x's response, with the headers writeError sets on the lean path.
func (s *LoopServer) writeError(x *loopExchange, e *Error) {
	body := errorBody(e)
	lc := x.lc
	b := append(lc.out[:0], "HTTP/1.1 "...)
	b = appendInt(b, e.Status)
	b = append(b, ' ')
	b = append(b, http.StatusText(e.Status)...)
	b = append(b, "\r\nCache-Control: no-store\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nX-Request-Id: "...)
	b = append(b, x.requestID...)
	if x.dep != nil {
		b = append(b, "\r\nAzureml-Model-Deployment: "...)
		b = append(b, x.dep.name...)
	}
	b = append(b, "\r\nDate: "...)
	b = leanserver.AppendDate(b, s.Router.clock.Now())
	b = append(b, "\r\nContent-Length: "...)
	b = appendInt(b, len(body))
	if lc.closeAfter || s.stopping.Load() {
		b = append(b, "\r\nConnection: close"...)
	}
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	lc.out = b
	lc.write(b)
}

// begin starts the request timeout and sends the request to its instance.
func (s *LoopServer) begin(x *loopExchange) {
	s.active.Add(1)
	x.lc.loop.deadlines.add(x, x.dep.timeout)
	s.send(x)
}

// send puts the request on a connection to x.in: an idle one, else a new one.
func (s *LoopServer) send(x *loopExchange) {
	// Built in the client's buffer: a client has one request in flight at a time.
	lc := x.lc
	lc.msg = appendRequestHead(lc.msg[:0], &x.req, requestURI(&x.req, x.in, x.suffix), x.requestID, x.in, len(x.body))
	lc.msg = append(lc.msg, x.body...)
	x.msg = lc.msg
	if up := x.lc.loop.takeIdle(x.in, x.start); up != nil {
		up.x, up.gotBytes, x.up = x, false, up
		// A failed write closes up at once; upstreamClosed then resends or answers 502.
		_, _ = up.c.Write(x.msg)
		return
	}
	s.dial(x)
}

// dial opens a connection to x.in off the loop; the loop gets it in OnOpen (which sends
// the request), or the failure in dialFailed.
func (s *LoopServer) dial(x *loopExchange) {
	ctx, cancel := context.WithCancel(s.ctx)
	up := &loopUpstream{loop: x.lc.loop, in: x.in, x: x, cancelDial: cancel}
	x.up = up
	go func() {
		defer cancel()
		nc, err := upstreamDialer.DialContext(ctx, "tcp", up.in.addr)
		if err == nil {
			var res <-chan gnet.RegisteredResult
			if res, err = up.loop.el.Enroll(gnet.NewContext(ctx, up), nc); err != nil {
				_ = nc.Close()
			} else if r := <-res; r.Err != nil {
				err = r.Err
			}
		}
		if err != nil {
			_ = up.loop.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				s.dialFailed(up, err)
				return nil
			}))
		}
	}()
}

// dialFailed retries a request whose instance could not be connected to on another
// ready instance of its deployment, once, as Router.retryOn does; or answers 502.
func (s *LoopServer) dialFailed(up *loopUpstream, err error) {
	x := up.x
	if x == nil || x.done || x.up != up {
		return
	}
	x.up, up.x = nil, nil
	if !x.retried {
		if next := s.Router.moveToAnother(x.dep, x.in, nil, x.requestID, err); next != nil {
			x.in, x.retried = next, true
			s.send(x)
			return
		}
	}
	s.failed(x, err)
}

// failed answers 502 for a request whose instance failed before a response head.
func (s *LoopServer) failed(x *loopExchange, err error) {
	s.log.Warn("instance failed", "deployment", x.dep.name, "instance", x.in.id,
		"request_id", x.requestID, "retried", x.retried, "error", err)
	x.status = http.StatusBadGateway
	x.headSent = true
	s.writeError(x, errInstanceFailed(x.dep, x.in))
	s.finish(x)
}

// upstreamTraffic passes an instance's response on to the client as it arrives.
func (s *LoopServer) upstreamTraffic(up *loopUpstream) gnet.Action {
	x := up.x
	if x == nil || x.done {
		return gnet.Close // bytes on an idle connection, or for a request that ended
	}
	up.gotBytes = true
	lc := x.lc
	buf, _ := up.c.Peek(-1)
	out := lc.out[:0]
	for !x.headSent {
		end := leanserver.HeadEnd(buf)
		if end < 0 {
			if len(buf) > maxResponseHead {
				s.detach(x)
				s.failed(x, errResponseHeadTooLarge)
				return gnet.Close
			}
			return gnet.None
		}
		var ok bool
		out, x.head, ok = appendClientHead(out, buf[:end], x.requestID, x.dep.name, lc.closeAfter || s.stopping.Load(), s.Router.clock.Now())
		_, _ = up.c.Discard(end)
		buf = buf[end:]
		if !ok {
			s.detach(x)
			s.failed(x, errMalformedResponse)
			return gnet.Close
		}
		if x.head.status >= 200 {
			x.headSent, x.status = true, x.head.status
		}
	}
	var n int
	complete, valid := false, true
	switch x.head.framing {
	case framingNone:
		complete = true
	case framingLength:
		n = int(min(int64(len(buf)), x.head.length-x.sent))
		out = append(out, buf[:n]...)
		x.sent += int64(n)
		complete = x.sent == x.head.length
	case framingChunked:
		n, complete, valid = x.chunks.scan(buf)
		out = append(out, buf[:n]...)
	case framingClose:
		if n = len(buf); n > 0 {
			out = appendChunk(out, buf)
		}
	}
	_, _ = up.c.Discard(n)
	lc.out = out
	if len(out) > 0 {
		lc.write(out)
	}
	if x.done {
		return gnet.Close
	}
	if !valid {
		// The status is out: cut the response, so the client sees it incomplete.
		s.detach(x)
		_ = lc.c.Close()
		s.finish(x)
		return gnet.Close
	}
	if !complete {
		return gnet.None
	}
	reuse := x.head.keepAlive && up.c.InboundBuffered() == 0
	s.detach(x)
	s.finish(x)
	if reuse {
		up.loop.putIdle(up, x.end)
		return gnet.None
	}
	return gnet.Close
}

// detach separates x from its instance connection; the caller closes or keeps that.
func (s *LoopServer) detach(x *loopExchange) {
	if up := x.up; up != nil {
		up.x = nil
		x.up = nil
	}
}

// abandon ends x's use of its instance connection: the connection is closed, so the
// instance sees its request end, or a dial under way is cancelled.
func (s *LoopServer) abandon(x *loopExchange) {
	up := x.up
	s.detach(x)
	switch {
	case up == nil:
	case up.c != nil:
		_ = up.c.Close()
	default:
		up.cancelDial()
	}
}

// upstreamClosed handles an instance connection that closed: idle, it is forgotten;
// carrying a request, the request is resent, finished or failed.
func (s *LoopServer) upstreamClosed(up *loopUpstream) {
	x := up.x
	if x == nil || x.done || x.up != up {
		if up.loop != nil && up.in != nil {
			up.loop.removeIdle(up)
		}
		return
	}
	s.detach(x)
	if x.headSent {
		if x.head.framing == framingClose {
			x.lc.write([]byte(lastChunk))
			s.finish(x)
			return
		}
		_ = x.lc.c.Close() // cut: the client must not take it for complete
		s.finish(x)
		return
	}
	// The instance closed a kept-alive connection as the request went out. Resend it on
	// a fresh one only when nothing of it can have been acted on twice.
	if up.reused && !up.gotBytes && !x.resent && x.idempotent {
		x.resent = true
		up.loop.dropIdle(x.in.pool)
		s.dial(x)
		return
	}
	s.failed(x, errConnectionClosed)
}

// timeout ends a request still running after its deployment's request timeout: the
// instance connection is closed, and the client gets 504, or a cut response when its
// head was out.
func (s *LoopServer) timeout(x *loopExchange) {
	if x.done {
		return
	}
	x.timedOut = true
	s.abandon(x)
	if x.headSent {
		_ = x.lc.c.Close()
		s.finish(x)
		return
	}
	x.status, x.headSent = http.StatusGatewayTimeout, true
	s.writeError(x, errTimeout(x.dep))
	s.finish(x)
}

// clientGone ends a request whose client closed its connection.
func (s *LoopServer) clientGone(x *loopExchange) {
	x.canceled = true
	x.dep.stats.canceled.Add(1)
	s.log.Debug("request canceled", "deployment", x.dep.name, "request_id", x.requestID)
	s.abandon(x)
	s.finish(x)
}

// finish releases x's slot, counts it and moves its client on to its next request. It
// runs once per exchange: a write that fails closes the client at once, whose clientGone
// may finish x first.
func (s *LoopServer) finish(x *loopExchange) {
	if x.done {
		return
	}
	x.done, x.end = true, s.Router.clock.Now()
	x.lc.loop.deadlines.remove(x)
	x.in.release()
	x.dep.released()
	st := x.dep.stats
	if x.timedOut {
		st.timeouts.Add(1)
	}
	status := x.status
	if x.canceled {
		status = 0
	}
	st.observe(status)
	s.observe(x)
	s.exchangeEnded()
	lc := x.lc
	if lc.x != x {
		return
	}
	lc.x = nil
	switch {
	case x.canceled:
	case lc.closeAfter || s.stopping.Load():
		_ = lc.c.Close()
	case lc.buffered():
		// A pipelined request: its connection's OnTraffic serves it (or hands it off).
		_ = lc.c.Wake(nil)
	}
}

// observe tells Observe about an answered request (a canceled one as the 502 the lean
// path writes for it).
func (s *LoopServer) observe(x *loopExchange) {
	s.served.Add(1)
	if s.Observe == nil {
		return
	}
	status := x.status
	if x.canceled {
		status = http.StatusBadGateway
	}
	dep := ""
	if x.dep != nil {
		dep = x.dep.name
	}
	s.Observe(x.endpoint, dep, status, x.end.Sub(x.start))
}
