package router

import (
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"unsafe"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/httpsyntax"
)

// The usual instance response (HTTP/1.1, a final status, a Content-Length, no
// Transfer-Encoding, Trailer or Connection header, its whole head already buffered) is
// parsed here without http.ReadResponse, which spends about eight allocations per response
// on a fresh Response, header map, transfer reader and line strings. Anything else is left
// in the buffer for http.ReadResponse: readHeadFast consumes nothing unless it succeeds.

// respHead is a connection's reusable response: one response is read at a time per
// connection, and the server copies the header values out (http.Header.Clone at
// WriteHeader) before the connection can carry the next one.
type respHead struct {
	res  http.Response
	hdr  http.Header
	vals []string
}

// readHeadFast parses the response head at the start of c.br, or returns nil (having read
// nothing) when it is not the usual kind. The body is left in c.br; the response's
// ContentLength says how long it is. The header values are kept in scratch when they fit:
// scratch must belong to this response alone and never change after.
func (c *upConn) readHeadFast(req *http.Request, scratch []byte) *http.Response {
	if req.Method == http.MethodHead {
		return nil
	}
	buf, _ := c.br.Peek(c.br.Buffered())
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 || len(buf) < len("HTTP/1.1 200\r\n") || string(buf[:9]) != "HTTP/1.1 " {
		return nil
	}
	code := 0
	for _, d := range buf[9:12] {
		if d < '0' || d > '9' {
			return nil
		}
		code = code*10 + int(d-'0')
	}
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified || (buf[12] != ' ' && buf[12] != '\r') {
		return nil
	}
	h := &c.resp
	if h.hdr == nil {
		h.hdr = make(http.Header, 8)
	}
	clear(h.hdr)
	h.vals = h.vals[:0]
	lines := buf[bytes.IndexByte(buf, '\n')+1 : end+2]
	// One string holds every value; each value is a slice of it.
	var block string
	if len(lines) > 0 && len(lines) <= len(scratch) {
		n := copy(scratch, lines)
		block = unsafe.String(&scratch[0], n)
	} else {
		block = string(lines)
	}
	length := int64(-1)
	for off := 0; off < len(lines); {
		nl := bytes.IndexByte(lines[off:], '\n')
		if nl < 1 || lines[off+nl-1] != '\r' {
			return nil
		}
		start, lineEnd := off, off+nl-1
		line := lines[start:lineEnd]
		off += nl + 1
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' {
			return nil // an obsolete folded line
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return nil
		}
		key := canonicalKey(line[:colon])
		if key == "" {
			return nil
		}
		value := httpsyntax.TrimOWS(block[start+colon+1 : lineEnd])
		switch key {
		case "Transfer-Encoding", "Trailer", "Connection":
			return nil
		case "Content-Length":
			if length >= 0 {
				return nil
			}
			if length = httpsyntax.ParseContentLength(value); length < 0 {
				return nil
			}
		}
		if len(h.vals) >= 64 {
			return nil // an unusual number of headers
		}
		h.vals = append(h.vals, value)
		if prev, ok := h.hdr[key]; ok {
			h.hdr[key] = append(prev[:len(prev):len(prev)], value)
		} else {
			h.hdr[key] = h.vals[len(h.vals)-1 : len(h.vals) : len(h.vals)]
		}
	}
	if length < 0 {
		return nil
	}
	_, _ = c.br.Discard(end + 4)
	h.res = http.Response{
		Status: http.StatusText(code), StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h.hdr, ContentLength: length, Request: req,
	}
	return &h.res
}

// canonicalKey returns the canonical form of a header name, without allocating for the
// names instances usually send; "" when it is not a valid name.
func canonicalKey(b []byte) string {
	if k, ok := commonKeys[string(b)]; ok {
		return k
	}
	for _, ch := range b {
		if ch <= ' ' || ch >= 0x7f || bytes.IndexByte([]byte(`"(),/:;<=>?@[\]{}`), ch) >= 0 {
			return ""
		}
	}
	return textproto.CanonicalMIMEHeaderKey(string(b))
}

// commonKeys maps header names as instances spell them to their canonical form.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Content-Type", "Content-Length", "Date", "Server", "Cache-Control",
		"Transfer-Encoding", "Trailer", "Connection", "Keep-Alive", "Vary", "Etag", "Last-Modified",
		"X-Request-Id", "X-Content-Type-Options", "Azureml-Model-Deployment", "X-Backend"} {
		m[k] = k
		m[textproto.CanonicalMIMEHeaderKey(k)] = textproto.CanonicalMIMEHeaderKey(k)
		lower := []byte(k)
		for i, ch := range lower {
			if 'A' <= ch && ch <= 'Z' {
				lower[i] = ch + 'a' - 'A'
			}
		}
		m[string(lower)] = textproto.CanonicalMIMEHeaderKey(k)
	}
	return m
}()

// fixedBody reads the n bytes of a fast-parsed response body from the connection.
type fixedBody struct {
	r io.Reader
	n int64
}

func (b *fixedBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if b.n <= 0 && err == nil {
		err = io.EOF
	}
	if err == io.EOF && b.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *fixedBody) Close() error { return nil }
