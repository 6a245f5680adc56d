package leanserver

import (
	"bytes"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/httpsyntax"

	"golang.org/x/net/http/httpguts"
)

// maxHeaders bounds the header lines of a usual request; a request with more goes to
// net/http, whose own limit is the head's size.
const maxHeaders = 64

// head is a usual request's head, parsed from the bytes at the start of the connection's
// buffer.
type head struct {
	method, target, host string
	contentLength        int64 // 0 when there is no body
	close                bool  // Connection: close
	header               http.Header
}

// parseHead parses the request head in b, which ends with the blank line. It reports
// false when the request is not of the usual kind (see the package documentation);
// nothing in b is retained then. On success every string of h is a slice of one copy of
// b, made once.
func parseHead(b []byte) (h head, ok bool) {
	lines, clean := cleanLines(b)
	if !clean || !bytes.HasSuffix(b, []byte("\r\n\r\n")) {
		return head{}, false
	}
	s := string(b) // the one allocation that backs every string of the request
	end := strings.IndexByte(s, '\r')
	method, rest, ok1 := strings.Cut(s[:end], " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || proto != "HTTP/1.1" || !validMethod(method) || !plainTarget(target) {
		return head{}, false
	}
	h.method, h.target = method, target

	lines -= 2 // the request line and the blank one
	if lines < 1 || lines > maxHeaders {
		return head{}, false // a Host header is required
	}
	h.header = make(http.Header, lines)
	values := make([]string, 0, lines)
	hosts, lengths := 0, 0
	for pos := end + 2; s[pos] != '\r'; {
		end = pos + strings.IndexByte(s[pos:], '\r')
		line := s[pos:end]
		pos = end + 2
		colon := strings.IndexByte(line, ':')
		if colon <= 0 || !httpguts.ValidHeaderFieldName(line[:colon]) {
			return head{}, false // includes a folded line, which starts with white space
		}
		key, value := textproto.CanonicalMIMEHeaderKey(line[:colon]), httpsyntax.TrimOWS(line[colon+1:])
		switch key {
		case "Host":
			hosts++
			h.host = value
			continue // Request.Host, as net/http has it
		case "Content-Length":
			lengths++
			if h.contentLength = httpsyntax.ParseContentLength(value); h.contentLength < 0 {
				return head{}, false
			}
		case "Transfer-Encoding", "Expect", "Upgrade":
			return head{}, false
		case "Connection":
			if httpsyntax.HasToken(value, "upgrade") {
				return head{}, false
			}
			h.close = h.close || httpsyntax.HasToken(value, "close")
		}
		values = append(values, value)
		if prev, ok := h.header[key]; ok {
			h.header[key] = append(prev[:len(prev):len(prev)], value)
		} else {
			h.header[key] = values[len(values)-1 : len(values) : len(values)]
		}
	}
	if hosts != 1 || lengths > 1 || !httpguts.ValidHostHeader(h.host) {
		return head{}, false
	}
	return h, true
}

// cleanLines reports whether every line of b ends in CRLF and no other control byte but
// HTAB appears (what net/http allows in a header value, and more than it allows
// anywhere else), and counts the lines.
func cleanLines(b []byte) (lines int, ok bool) {
	for i, c := range b {
		if c >= 0x20 && c != 0x7f || c == '\t' {
			continue
		}
		switch {
		case c == '\r' && i+1 < len(b) && b[i+1] == '\n':
		case c == '\n' && i > 0 && b[i-1] == '\r':
			lines++
		default:
			return 0, false
		}
	}
	return lines, true
}

// validMethod reports whether m is a token this server handles: HEAD (whose response
// has no body), CONNECT and PRI (HTTP/2's preface) are net/http's.
func validMethod(m string) bool {
	switch m {
	case "GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
		return true
	case "", "HEAD", "CONNECT", "PRI":
		return false
	}
	for _, r := range m {
		if !httpguts.IsTokenRune(r) {
			return false
		}
	}
	return true
}

// plainTarget reports whether a request target is in origin form and its path is one
// url.URL keeps as it is (httpsyntax.PlainPath), so Path needs no decoding and RawPath
// stays empty. Its query may hold any printable ASCII.
func plainTarget(t string) bool {
	if t == "" || t[0] != '/' || strings.HasPrefix(t, "//") {
		return false
	}
	path, query, _ := strings.Cut(t, "?")
	if !httpsyntax.PlainPath(path) {
		return false
	}
	for i := 0; i < len(query); i++ {
		if query[i] <= ' ' || query[i] >= 0x7f || query[i] == '#' {
			return false
		}
	}
	return true
}

// headEnd returns the length of the request head at the start of b (through its first
// empty line), or -1 when b does not hold all of it yet. A head whose lines end in a bare
// LF ends too, so that it is not waited on: parseHead then refuses it.
func headEnd(b []byte) int {
	end := -1
	if i := bytes.Index(b, []byte("\n\r\n")); i >= 0 {
		end = i + 3
	}
	if i := bytes.Index(b, []byte("\n\n")); i >= 0 && (end < 0 || i+2 < end) {
		end = i + 2
	}
	return end
}

// HeadEnd returns the length of the HTTP/1.x head at the start of b (request or
// response: through its first empty line), or -1 when b does not hold all of it yet.
func HeadEnd(b []byte) int { return headEnd(b) }

// ParseRequest parses the head of a usual request (see the package documentation), which
// b holds through its blank line, into req and u, as Server hands its handler a request:
// canonical header keys, Host, RemoteAddr, RequestURI, ContentLength and Close set, URL
// pointing at u, no body and no context of its own. The caller provides both so that it
// can keep them in its own per-request state. It reports false for any request that is
// not usual; b is not retained.
func ParseRequest(b []byte, remoteAddr string, req *http.Request, u *url.URL) bool {
	h, ok := parseHead(b)
	if !ok {
		return false
	}
	path, query, hasQuery := strings.Cut(h.target, "?")
	*u = url.URL{Path: path, RawQuery: query, ForceQuery: hasQuery && query == ""}
	*req = http.Request{
		Method: h.method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h.header, Host: h.host, RemoteAddr: remoteAddr, RequestURI: h.target,
		ContentLength: h.contentLength, Close: h.close, Body: http.NoBody,
	}
	return true
}
