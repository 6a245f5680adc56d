package leanserver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/httpsyntax"

	"golang.org/x/net/http/httpguts"
)

// bufferBeforeChunking is how much body a response keeps before deciding its framing, as
// net/http: a handler that writes no more and returns gets a Content-Length.
const bufferBeforeChunking = 2048

// response is the http.ResponseWriter of a usual request. It writes into the connection's
// buffer; see the package documentation for the rules it shares with net/http.
type response struct {
	c      *conn
	req    *http.Request
	header http.Header

	status      int   // the final status, once WriteHeader was called
	length      int64 // the handler's Content-Length, -1 when it set none
	written     int64 // body bytes the handler wrote
	committed   bool  // status line and header are in the connection's buffer
	chunked     bool
	noBody      bool // 204, 304 and 101 responses carry none
	hasType     bool // the handler set Content-Type (possibly to nothing)
	hasDate     bool
	trailers    []string // declared in the Trailer header
	prefixed    bool     // the header held http.TrailerPrefix keys at WriteHeader
	closeAfter  bool     // the connection closes after this response
	deadlines   bool     // the handler set a deadline on the connection
	handlerDone bool
	err         error // a write to the connection failed
}

func (w *response) init(c *conn, req *http.Request) {
	*w = response{c: c, req: req, header: make(http.Header, 8), length: -1, closeAfter: req.Close}
	c.pending = c.pending[:0]
}

// Header is the response header, to be set before WriteHeader or the first Write.
func (w *response) Header() http.Header { return w.header }

// WriteHeader sends an informational (1xx) response at once, and records a final status
// and the header as it is now for the response.
func (w *response) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if w.status != 0 {
		return // superfluous, as net/http ignores it
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.writeInformational(code)
		return
	}
	w.status = code
	w.noBody = code < 200 || code == http.StatusNoContent || code == http.StatusNotModified
	w.snapshotHeader()
}

// snapshotHeader writes the handler's header lines into the connection's head buffer,
// noting what the framing needs to know: later changes to the header are not sent
// (except trailers).
func (w *response) snapshotHeader() {
	b := w.c.headBuf[:0]
	for k, vv := range w.header {
		switch k {
		case "Content-Length":
			if len(vv) > 0 {
				if n := httpsyntax.ParseContentLength(strings.TrimSpace(vv[0])); n >= 0 {
					w.length = n
				}
			}
			continue // written with the framing
		case "Transfer-Encoding":
			continue // the framing is the server's
		case "Content-Type":
			w.hasType = true
		case "Date":
			w.hasDate = true
		case "Connection":
			if httpguts.HeaderValuesContainsToken(vv, "close") {
				w.closeAfter = true
			}
		case "Trailer":
			for _, v := range vv {
				for _, t := range strings.Split(v, ",") {
					if t = strings.TrimSpace(t); t != "" {
						w.trailers = append(w.trailers, http.CanonicalHeaderKey(t))
					}
				}
			}
		}
		if strings.HasPrefix(k, http.TrailerPrefix) {
			w.prefixed = true
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		b = appendHeaderLines(b, k, vv)
	}
	w.c.headBuf = b
}

// appendHeaderLines appends "k: v\r\n" for each value, with line breaks in values turned
// into spaces, as net/http does.
func appendHeaderLines(b []byte, k string, vv []string) []byte {
	for _, v := range vv {
		if strings.ContainsAny(v, "\r\n") {
			v = strings.Map(func(r rune) rune {
				if r == '\r' || r == '\n' {
					return ' '
				}
				return r
			}, v)
		}
		b = append(b, k...)
		b = append(b, ": "...)
		b = append(b, strings.TrimSpace(v)...)
		b = append(b, "\r\n"...)
	}
	return b
}

// writeInformational sends a 1xx response with the header as it is now.
func (w *response) writeInformational(code int) {
	bw := w.c.bw
	_, _ = bw.WriteString("HTTP/1.1 ")
	_, _ = bw.Write(appendStatus(w.c.headBuf[:0], code))
	for k, vv := range w.header {
		if httpguts.ValidHeaderFieldName(k) {
			w.c.headBuf = appendHeaderLines(w.c.headBuf[:0], k, vv)
			_, _ = bw.Write(w.c.headBuf)
		}
	}
	_, _ = bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil {
		w.err = err
	}
}

func appendStatus(b []byte, code int) []byte {
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(code)...)
	return append(b, "\r\n"...)
}

// Write writes body bytes: held until the framing is decided, then to the connection.
func (w *response) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if w.noBody {
		return 0, http.ErrBodyNotAllowed
	}
	if w.length >= 0 && w.written+int64(len(p)) > w.length {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.committed {
		if w.length < 0 && len(w.c.pending)+len(p) <= bufferBeforeChunking {
			w.c.pending = append(w.c.pending, p...)
			return len(p), nil
		}
		w.commit(p)
		if w.err != nil {
			return 0, w.err
		}
	}
	if err := w.writeBody(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeBody writes p (as a chunk when chunked) to the connection.
func (w *response) writeBody(p []byte) error {
	bw := w.c.bw
	if w.chunked {
		var size [16]byte
		_, _ = bw.Write(strconv.AppendInt(size[:0], int64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
		_, _ = bw.Write(p)
		_, err := bw.WriteString("\r\n")
		w.err = err
		return err
	}
	_, err := bw.Write(p)
	w.err = err
	return err
}

// commit writes the status line and header, deciding the framing. first is the first
// body bytes not yet in pending (for sniffing a Content-Type).
func (w *response) commit(first []byte) {
	w.committed = true
	c := w.c
	b := append(c.lineBuf[:0], "HTTP/1.1 "...)
	b = appendStatus(b, w.status)
	b = append(b, c.headBuf...)
	if !w.hasDate {
		b = append(b, "Date: "...)
		b = AppendDate(b, c.s.clock.Now())
		b = append(b, "\r\n"...)
	}
	if !w.hasType && !w.noBody && w.written > 0 {
		sniff := c.pending
		if len(sniff) == 0 {
			sniff = first
		}
		b = append(b, "Content-Type: "...)
		b = append(b, http.DetectContentType(sniff)...)
		b = append(b, "\r\n"...)
	}
	switch {
	case w.noBody:
	case w.length >= 0:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, w.length, 10)
		b = append(b, "\r\n"...)
	case w.handlerDone && len(w.trailers) == 0 && !w.prefixed:
		w.length = int64(len(c.pending))
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, w.length, 10)
		b = append(b, "\r\n"...)
	default:
		w.chunked = true
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	if w.closeAfter || c.s.closing.Load() {
		w.closeAfter = true
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	c.lineBuf = b
	if _, err := c.bw.Write(b); err != nil {
		w.err = err
		return
	}
	if len(c.pending) > 0 {
		p := c.pending
		c.pending = c.pending[:0]
		_ = w.writeBody(p)
	}
}

// Flush sends the header and what was written so far.
func (w *response) Flush() { _ = w.FlushError() }

// FlushError is Flush for http.ResponseController, with the connection's error.
func (w *response) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(nil)
	}
	if w.err != nil {
		return w.err
	}
	w.err = w.c.bw.Flush()
	return w.err
}

// SetReadDeadline sets the connection's read deadline, for http.ResponseController;
// it holds until the handler returns.
func (w *response) SetReadDeadline(t time.Time) error {
	w.deadlines = true
	return w.c.nc.SetReadDeadline(t)
}

// SetWriteDeadline sets the connection's write deadline, for http.ResponseController;
// it holds until the handler returns.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.deadlines = true
	return w.c.nc.SetWriteDeadline(t)
}

// AfterClientGone arranges for f to run when the request's client is found gone while
// its handler runs, as context.AfterFunc(r.Context(), f) would, but without the
// registration on the request's context that costs a handler on the usual path several
// allocations. stop reports whether it stopped f from running. One callback per
// request: a second call falls back to context.AfterFunc. stop may be called until the
// handler returns.
func (w *response) AfterClientGone(f func()) (stop func() bool) {
	c := w.c
	x := c.current
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if x == nil || x.onGone != nil || &x.w != w {
		return context.AfterFunc(w.req.Context(), f)
	}
	x.onGone = f
	return c.stopGoneFn
}

// stopGone is the stop function of the current request's AfterClientGone callback.
func (c *conn) stopGone() bool {
	x := c.current
	return x != nil && x.gone.CompareAndSwap(0, goneStopped)
}

// EnableFullDuplex is for http.ResponseController: a handler may read its body while it
// writes its response here already.
func (w *response) EnableFullDuplex() error { return nil }

// finish completes the response after the handler returned: the header if nothing was
// sent, the rest of the body, the last chunk and trailers, and a flush.
func (w *response) finish() error {
	w.handlerDone = true
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(nil)
	}
	c := w.c
	if w.deadlines {
		_ = c.nc.SetReadDeadline(time.Time{})
		_ = c.nc.SetWriteDeadline(time.Time{})
	}
	if w.err != nil {
		return w.err
	}
	if w.chunked {
		b := append(c.headBuf[:0], "0\r\n"...)
		for _, k := range w.trailers {
			b = appendHeaderLines(b, k, w.header[k])
		}
		for k, vv := range w.header {
			if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && httpguts.ValidHeaderFieldName(name) {
				b = appendHeaderLines(b, http.CanonicalHeaderKey(name), vv)
			}
		}
		b = append(b, "\r\n"...)
		c.headBuf = b
		_, _ = c.bw.Write(b)
	} else if !w.noBody && w.written < w.length {
		w.closeAfter = true // the handler wrote less than it announced
	}
	if c.state.Load() == stateClosed {
		w.closeAfter = true // reading the request failed
	}
	return c.bw.Flush()
}

// dateValue caches the Date header's value for a second.
type dateValue struct {
	sec int64
	b   []byte
}

var dateCache atomic.Pointer[dateValue]

// AppendDate appends now as a Date header value (http.TimeFormat), from a value cached
// for the second.
func AppendDate(b []byte, now time.Time) []byte {
	d := dateCache.Load()
	if d == nil || d.sec != now.Unix() {
		d = &dateValue{sec: now.Unix(), b: now.UTC().AppendFormat(nil, http.TimeFormat)}
		dateCache.Store(d)
	}
	return append(b, d.b...)
}
