package leanserver

import (
	"bufio"
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

const scoringHead = "POST /ep/score HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer 0123456789abcdef\r\n" +
	"Content-Type: application/json\r\nX-Request-Id: abc-123\r\nContent-Length: 27\r\n\r\n"

// FuzzParseHead holds parseHead to net/http: whatever it accepts, http.ReadRequest reads
// the same way (method, target, host, header, length, close). It may refuse what
// net/http accepts; that request then goes to net/http.
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		scoringHead,
		"GET /p?q=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"GET /p HTTP/1.1\r\nhost: x\r\nx-a: 1\r\nX-A: 2\r\nContent-Length: 0\r\n\r\n",
		"PUT /a/b;c HTTP/1.1\r\nHost: [::1]:80\r\nConnection: keep-alive, close\r\n\r\n",
		"GET /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"0 /0 HTTP/1.1\r\nHost:\n0\r\n\r\n",    // a bare LF inside a line: net/http ends the line there
		"GET /a!b HTTP/1.1\r\nHost: x\r\n\r\n", // net/url keeps a RawPath for "!'()*"
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end := headEnd(b)
		if end < 0 {
			return
		}
		h, ok := parseHead(b[:end])
		if !ok {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:end])))
		if err != nil {
			t.Fatalf("parseHead accepted %q, net/http refuses it: %v", b[:end], err)
		}
		if req.Method != h.method || req.RequestURI != h.target || req.Host != h.host ||
			req.ContentLength != h.contentLength || req.Close != h.close {
			t.Fatalf("%q: parseHead read %s %s host %q length %d close %v; net/http %s %s host %q length %d close %v",
				b[:end], h.method, h.target, h.host, h.contentLength, h.close,
				req.Method, req.RequestURI, req.Host, req.ContentLength, req.Close)
		}
		if !reflect.DeepEqual(map[string][]string(req.Header), map[string][]string(h.header)) {
			t.Fatalf("%q: parseHead read the header %v, net/http %v", b[:end], h.header, req.Header)
		}
		path, query, _ := strings.Cut(h.target, "?")
		if req.URL.Path != path || req.URL.RawPath != "" || req.URL.RawQuery != query {
			t.Fatalf("%q: net/http has path %q (raw %q) and query %q", b[:end], req.URL.Path, req.URL.RawPath, req.URL.RawQuery)
		}
	})
}

func BenchmarkParseHead(b *testing.B) {
	head := []byte(scoringHead)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := parseHead(head); !ok {
			b.Fatal("refused")
		}
	}
}
