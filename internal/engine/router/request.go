package router

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strings"
	"unsafe"
)

// headerValue is h.Get for a key already in canonical form: Get canonicalizes its key,
// which allocates for one that is not.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// splitScoringPath splits "/{endpoint}/score[/...]" into the endpoint and "/score[/...]".
func splitScoringPath(p string) (name, suffix string, ok bool) {
	if len(p) < 2 || p[0] != '/' {
		return "", "", false
	}
	i := strings.IndexByte(p[1:], '/')
	if i <= 0 {
		return "", "", false
	}
	name, suffix = p[1:1+i], p[1+i:]
	if suffix != "/score" && !strings.HasPrefix(suffix, "/score/") {
		return "", "", false
	}
	return name, suffix, true
}

// authorize checks "Authorization: Bearer <credential>" against the endpoint.
func (ep *endpointState) authorize(header string) bool {
	tok, ok := bearerToken(header)
	if !ok {
		return false
	}
	switch ep.authMode {
	case AuthModeKey:
		// Compare digests: constant time in the content and the length of the keys, and
		// both keys are always compared, so timing does not tell which one matched.
		d := sha256.Sum256([]byte(tok))
		match := 0
		for i := range ep.keyDigests {
			match |= subtle.ConstantTimeCompare(d[:], ep.keyDigests[i][:])
		}
		return match == 1
	case AuthModeAMLToken:
		return ep.verify != nil && ep.verify(tok)
	}
	return false
}

func bearerToken(header string) (string, bool) {
	const prefix = "Bearer "
	if len(header) < len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return "", false
	}
	tok := strings.TrimSpace(header[len(prefix):])
	return tok, tok != ""
}

// requestID keeps the client's request id when it is a sane token, or makes a UUID in buf
// (which must never change after).
func requestID(in string, buf *[36]byte) string {
	if in != "" && len(in) <= 128 {
		ok := true
		for i := 0; i < len(in); i++ {
			if in[i] < 0x21 || in[i] > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return in
		}
	}
	return newUUID(buf)
}

// newUUID returns a random (version 4) UUID. Request ids need uniqueness, not secrecy, so
// math/rand/v2's per-thread ChaCha8 source is enough and cheap.
func newUUID(s *[36]byte) string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return unsafe.String(&s[0], len(s))
}
