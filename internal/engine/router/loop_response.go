package router

import (
	"bytes"
	"net/http"
	"net/textproto"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/httpsyntax"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"

	"golang.org/x/net/http/httpguts"
)

// The event-loop server's view of an instance's response: the head is rewritten for the
// client in one pass over its bytes, and the body is passed on as it arrives, its framing
// tracked (for chunked bodies by chunkScanner) only to find where the response ends.

// bodyFraming is how the end of a response body is found.
type bodyFraming int

const (
	framingNone    bodyFraming = iota // no body: 1xx, 204, 304
	framingLength                     // Content-Length bytes
	framingChunked                    // chunked, passed on as it came
	framingClose                      // until the instance closes; re-framed as chunked
)

// responseHead is what the event-loop server needs to know of an instance's response.
type responseHead struct {
	status  int
	framing bodyFraming
	length  int64 // framingLength: the body's length
	// keepAlive: the instance keeps the connection open after this response.
	keepAlive bool
}

// appendClientHead parses the instance's response head (through its blank line) and
// appends the head the client gets to dst: the same status, the instance's end-to-end
// headers under their canonical names (hop-by-hop ones, those named in Connection, and
// the two the router sets dropped), X-Request-Id and azureml-model-deployment, a Date
// (now) when the instance sent none, the body's framing, and Connection: close when closeClient.
// An informational (1xx) response is parsed but nothing is appended: it is not passed on.
// ok is false for a head the router cannot pass on (malformed, or framed by a transfer
// coding other than chunked alone, which Go's client refuses too).
func appendClientHead(dst, head []byte, requestID, deployment string, closeClient bool, now time.Time) (out []byte, rh responseHead, ok bool) {
	lineEnd := bytes.IndexByte(head, '\n')
	if lineEnd < 0 {
		return dst, rh, false
	}
	statusLine := bytes.TrimSuffix(head[:lineEnd], []byte("\r"))
	var http10 bool
	switch {
	case bytes.HasPrefix(statusLine, []byte("HTTP/1.1 ")):
	case bytes.HasPrefix(statusLine, []byte("HTTP/1.0 ")):
		http10 = true
	default:
		return dst, rh, false
	}
	code := statusLine[len("HTTP/1.1 "):]
	if len(code) < 3 || len(code) > 3 && code[3] != ' ' {
		return dst, rh, false
	}
	for _, c := range code[:3] {
		if c < '0' || c > '9' {
			return dst, rh, false
		}
		rh.status = rh.status*10 + int(c-'0')
	}
	if rh.status < 100 {
		return dst, rh, false
	}

	// First pass: the headers that decide framing and which others are dropped.
	var connection []string
	lengths, chunked, otherCoding, hasDate := 0, false, false, false
	rh.length = -1
	ok = eachHeader(head[lineEnd+1:], func(key string, value []byte) bool {
		switch key {
		case "Connection":
			connection = append(connection, string(value))
		case "Content-Length":
			n := httpsyntax.ParseContentLength(string(value))
			if n < 0 || lengths > 0 && n != rh.length {
				return false
			}
			lengths++
			rh.length = n
		case "Transfer-Encoding":
			if chunked || !bytes.EqualFold(value, []byte("chunked")) {
				otherCoding = true
			}
			chunked = true
		case "Date":
			hasDate = true
		}
		return true
	})
	if !ok || otherCoding {
		return dst, rh, false
	}
	if rh.status < 200 {
		return dst, rh, rh.status != http.StatusSwitchingProtocols
	}
	switch {
	case rh.status == http.StatusNoContent || rh.status == http.StatusNotModified:
		rh.framing = framingNone
	case chunked:
		rh.framing = framingChunked
	case lengths > 0:
		rh.framing = framingLength
	default:
		rh.framing = framingClose
	}
	closes := headerValuesContainToken(connection, "close")
	rh.keepAlive = rh.framing != framingClose && !closes && (!http10 || headerValuesContainToken(connection, "keep-alive"))

	dst = append(dst, "HTTP/1.1 "...)
	dst = append(dst, statusLine[len("HTTP/1.1 "):]...)
	dst = append(dst, "\r\n"...)
	eachHeader(head[lineEnd+1:], func(key string, value []byte) bool {
		switch key {
		case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
			"Proxy-Authorization", "Te", "Transfer-Encoding", "Upgrade", "Content-Length",
			RequestIDHeader, canonicalDeploymentHeader:
			return true // hop-by-hop, framing (written below), or set by the router
		}
		if len(connection) > 0 && headerValuesContainToken(connection, key) {
			return true
		}
		dst = append(dst, key...)
		dst = append(dst, ": "...)
		dst = append(dst, value...)
		dst = append(dst, "\r\n"...)
		return true
	})
	dst = append(dst, "X-Request-Id: "...)
	dst = append(dst, requestID...)
	dst = append(dst, "\r\nAzureml-Model-Deployment: "...)
	dst = append(dst, deployment...)
	dst = append(dst, "\r\n"...)
	if !hasDate {
		dst = append(dst, "Date: "...)
		dst = leanserver.AppendDate(dst, now)
		dst = append(dst, "\r\n"...)
	}
	switch rh.framing {
	case framingLength:
		dst = append(dst, "Content-Length: "...)
		dst = appendInt(dst, int(rh.length))
		dst = append(dst, "\r\n"...)
	case framingChunked, framingClose:
		dst = append(dst, "Transfer-Encoding: chunked\r\n"...)
	}
	if closeClient {
		dst = append(dst, "Connection: close\r\n"...)
	}
	return append(dst, "\r\n"...), rh, true
}

// eachHeader calls f with every header field of a head's header section (which ends
// with its blank line), its name canonical and its value without surrounding white
// space, until f returns false. It reports false for a malformed field: a name that is
// not a token (a folded line starts with white space, so it is one) or a missing colon.
func eachHeader(b []byte, f func(key string, value []byte) bool) bool {
	for len(b) > 0 {
		end := bytes.IndexByte(b, '\n')
		if end < 0 {
			return false
		}
		line := bytes.TrimSuffix(b[:end], []byte("\r"))
		b = b[end+1:]
		if len(line) == 0 {
			return true
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return false
		}
		key := canonicalKey(line[:colon])
		if key == "" {
			name := string(line[:colon])
			if !httpguts.ValidHeaderFieldName(name) {
				return false
			}
			key = textproto.CanonicalMIMEHeaderKey(name)
		}
		value := bytes.Trim(line[colon+1:], " \t")
		if !f(key, value) {
			return false
		}
	}
	return false // no blank line
}

// appendChunk appends p as one chunk of a chunked body.
func appendChunk(dst, p []byte) []byte {
	const hex = "0123456789abcdef"
	var d [16]byte
	i := len(d)
	for n := len(p); ; n >>= 4 {
		i--
		d[i] = hex[n&0xf]
		if n < 16 {
			break
		}
	}
	dst = append(dst, d[i:]...)
	dst = append(dst, "\r\n"...)
	dst = append(dst, p...)
	return append(dst, "\r\n"...)
}

// lastChunk ends a chunked body without trailers.
const lastChunk = "0\r\n\r\n"

// chunkScanner follows a chunked body as it passes, to find its end (RFC 9112 section
// 7.1): chunk sizes with optional extensions, chunk data and its CRLF, then the trailer
// section and its blank line.
type chunkScanner struct {
	state  chunkState
	size   int64
	digits int
}

type chunkState int

const (
	chunkSize chunkState = iota
	chunkExt
	chunkSizeLF
	chunkData
	chunkDataCR
	chunkDataLF
	chunkTrailerStart
	chunkTrailerLine
	chunkTrailerLF
	chunkEndLF
)

// maxChunkSizeDigits bounds a chunk size (16 hex digits would overflow int64).
const maxChunkSizeDigits = 15

// scan consumes p, the next bytes of the body, and returns how many of them belong to it:
// all of them until the body ends, when done is set. ok is false for bytes that cannot be
// a chunked body.
func (s *chunkScanner) scan(p []byte) (n int, done, ok bool) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch s.state {
		case chunkSize:
			switch {
			case isHex(c):
				if s.digits == maxChunkSizeDigits {
					return i, false, false
				}
				s.size = s.size<<4 | int64(unhex(c))
				s.digits++
			case s.digits > 0 && (c == ';' || c == ' ' || c == '\t'):
				s.state = chunkExt
			case s.digits > 0 && c == '\r':
				s.state = chunkSizeLF
			default:
				return i, false, false
			}
		case chunkExt:
			switch c {
			case '\r':
				s.state = chunkSizeLF
			case '\n':
				return i, false, false
			}
		case chunkSizeLF:
			if c != '\n' {
				return i, false, false
			}
			if s.size == 0 {
				s.state = chunkTrailerStart
			} else {
				s.state = chunkData
			}
		case chunkData:
			k := int64(len(p) - i)
			if k > s.size {
				k = s.size
			}
			s.size -= k
			i += int(k) - 1
			if s.size == 0 {
				s.state = chunkDataCR
			}
		case chunkDataCR:
			if c != '\r' {
				return i, false, false
			}
			s.state = chunkDataLF
		case chunkDataLF:
			if c != '\n' {
				return i, false, false
			}
			s.state, s.digits = chunkSize, 0
		case chunkTrailerStart:
			if c == '\r' {
				s.state = chunkEndLF
			} else {
				s.state = chunkTrailerLine
			}
		case chunkTrailerLine:
			if c == '\r' {
				s.state = chunkTrailerLF
			}
		case chunkTrailerLF:
			if c != '\n' {
				return i, false, false
			}
			s.state = chunkTrailerStart
		case chunkEndLF:
			if c != '\n' {
				return i, false, false
			}
			return i + 1, true, true
		}
	}
	return len(p), false, true
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
