package router

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxMirrorResponseDrain bounds how much of a mirror's response is read (to reuse its
// connection) before the connection is dropped instead.
const maxMirrorResponseDrain = 1 << 20

// mirror sends a copy of out to the mirror deployment m in the background when m has a
// free slot. It buffers out's body (replacing out.Body with the buffer) so that both the
// primary and the copy can send it. It never blocks on m.
func (r *Router) mirror(m *deploymentState, out *http.Request, a *attempt) {
	st := m.stats
	if out.ContentLength > r.maxMirror {
		st.mirrorDropped.Add(1)
		return
	}
	in := m.acquire(nil)
	if in == nil {
		st.mirrorDropped.Add(1)
		return
	}
	var body []byte
	if out.Body != nil && out.Body != http.NoBody {
		buf, err := io.ReadAll(io.LimitReader(out.Body, r.maxMirror+1))
		if err != nil || int64(len(buf)) > r.maxMirror {
			in.release()
			st.mirrorDropped.Add(1)
			// Give the primary the whole body: what was read, then the rest (or the error).
			rest := out.Body
			if err != nil {
				rest = io.NopCloser(errReader{err})
			}
			out.Body = readCloser{io.MultiReader(bytes.NewReader(buf), rest), out.Body}
			return
		}
		body = buf
		out.Body = io.NopCloser(bytes.NewReader(buf))
		out.ContentLength = int64(len(buf))
		out.TransferEncoding = nil
	}
	r.startMirror(m, in, out, a, body)
}

// mirrorBuffered sends a copy of req, whose body is already in memory, to m in the
// background when m has a free slot. It reports whether the copy went out: it then
// reads body until it is done.
func (r *Router) mirrorBuffered(m *deploymentState, req *http.Request, a *attempt, body []byte) bool {
	st := m.stats
	if int64(len(body)) > r.maxMirror {
		st.mirrorDropped.Add(1)
		return false
	}
	in := m.acquire(nil)
	if in == nil {
		st.mirrorDropped.Add(1)
		return false
	}
	return r.startMirror(m, in, req, a, body)
}

// startMirror starts the copy on its own goroutine, holding in's slot, unless the
// router is closed.
func (r *Router) startMirror(m *deploymentState, in *instance, out *http.Request, a *attempt, body []byte) bool {
	st := m.stats
	hdr := mirrorHeader(out.Header, a.requestID)

	r.mirrorMu.Lock()
	closed := r.closed
	if !closed {
		r.mirrors.Add(1)
	}
	r.mirrorMu.Unlock()
	if closed {
		in.release()
		st.mirrorDropped.Add(1)
		return false
	}
	st.mirrored.Add(1)
	st.mirrorInFlight.Add(1)
	go r.sendMirror(m, in, out.Method, a.suffix, out.URL.RawQuery, hdr, body)
	return true
}

// sendMirror sends one mirror copy and discards the answer; in's slot is released after.
func (r *Router) sendMirror(m *deploymentState, in *instance, method, suffix, rawQuery string, hdr http.Header, body []byte) {
	defer r.mirrors.Done()
	defer in.release()
	defer m.stats.mirrorInFlight.Add(-1) // before the slot is released
	ctx, cancel := context.WithCancelCause(r.ctx)
	timer := r.clock.AfterFunc(m.timeout, func() { cancel(errRequestTimeout) })
	defer timer.Stop()
	defer cancel(nil)

	u := &url.URL{RawQuery: rawQuery}
	setTarget(u, in.url, suffix)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		m.stats.mirrorFailed.Add(1)
		r.log.Error("building mirror copy failed", "deployment", m.name, "error", err)
		return
	}
	req.Header = hdr
	res, err := r.transport.RoundTrip(req)
	if err != nil {
		m.stats.mirrorFailed.Add(1)
		r.log.Debug("mirror copy failed", "deployment", m.name, "instance", in.id, "request_id", hdr.Get(RequestIDHeader), "error", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxMirrorResponseDrain))
	_ = res.Body.Close()
	if res.StatusCode >= 500 {
		m.stats.mirrorFailed.Add(1)
	}
}

// hopHeaders are the hop-by-hop headers of RFC 9110 section 7.6.1 and their common
// non-standard relatives.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// mirrorHeader is the header of a mirror copy: the client's, without hop-by-hop headers
// or the credential, with the request id.
func mirrorHeader(in http.Header, requestID string) http.Header {
	h := in.Clone()
	for _, v := range in.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
	h.Del("Authorization")
	h.Set(RequestIDHeader, requestID)
	return h
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

type readCloser struct {
	io.Reader
	io.Closer
}
