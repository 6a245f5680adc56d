// Package httpsyntax holds the few pieces of HTTP/1.1 syntax that the engine's scoring
// path parses itself, on both sides: the lean server reading requests
// (internal/engine/router/leanserver) and the router's client reading instance responses
// (internal/engine/router). Each follows what net/http accepts, so that a message read
// here means what it would mean to net/http.
package httpsyntax

import "strings"

// ParseContentLength parses a Content-Length value: decimal digits only (no sign, no
// white space), at most 18 of them. It returns -1 for anything else.
func ParseContentLength(s string) int64 {
	if s == "" || len(s) > 18 {
		return -1
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n
}

// TrimOWS trims the optional white space (spaces and tabs) around a header value.
func TrimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// HasToken reports whether a comma-separated header value lists token, ignoring case,
// as in "Connection: keep-alive, Upgrade".
func HasToken(v, token string) bool {
	for v != "" {
		var t string
		t, v, _ = strings.Cut(v, ",")
		if strings.EqualFold(TrimOWS(t), token) {
			return true
		}
	}
	return false
}

// PlainPath reports whether p holds only bytes that url.URL keeps as they are: letters,
// digits and "-._~$&+,/:;=@". Such a path needs no escaping, and net/url leaves its
// RawPath empty. (The other sub-delimiters, "!'()*", are escaped by EscapedPath, so a
// path holding them keeps its RawPath.)
func PlainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~$&+,/:;=@", c) >= 0:
		default:
			return false
		}
	}
	return true
}
