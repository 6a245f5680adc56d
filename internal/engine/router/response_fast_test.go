package router

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestReadHeadFast(t *testing.T) {
	post, _ := http.NewRequest(http.MethodPost, "http://instance/score", nil)
	head, _ := http.NewRequest(http.MethodHead, "http://instance/score", nil)
	for _, tc := range []struct {
		name   string
		req    *http.Request
		in     string
		fast   bool
		header http.Header
		body   string
	}{
		{name: "usual", req: post, fast: true,
			in:     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 2\r\nX-Custom-thing:  a b \r\nX-Custom-Thing: c\r\n\r\n{}rest",
			header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {"2"}, "X-Custom-Thing": {"a b", "c"}}, body: "{}"},
		{name: "error status", req: post, fast: true, in: "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
			header: http.Header{"Content-Length": {"0"}}},
		{name: "status without reason", req: post, fast: true, in: "HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nx",
			header: http.Header{"Content-Length": {"1"}}, body: "x"},
		{name: "head longer than a request's scratch", req: post, fast: true,
			in:     "HTTP/1.1 200 OK\r\nX-Long: " + strings.Repeat("v", 300) + "\r\nContent-Length: 1\r\n\r\nx",
			header: http.Header{"X-Long": {strings.Repeat("v", 300)}, "Content-Length": {"1"}}, body: "x"},
		{name: "chunked", req: post, in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"},
		{name: "no length", req: post, in: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close"},
		{name: "two lengths", req: post, in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx"},
		{name: "bad length", req: post, in: "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nx"},
		{name: "connection close", req: post, in: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx"},
		{name: "trailer", req: post, in: "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nContent-Length: 1\r\n\r\nx"},
		{name: "interim", req: post, in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"},
		{name: "no content", req: post, in: "HTTP/1.1 204 No Content\r\n\r\n"},
		{name: "HTTP/1.0", req: post, in: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx"},
		{name: "folded line", req: post, in: "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 1\r\n\r\nx"},
		{name: "bad name", req: post, in: "HTTP/1.1 200 OK\r\nX A: 1\r\nContent-Length: 1\r\n\r\nx"},
		{name: "bare LF", req: post, in: "HTTP/1.1 200 OK\r\nX-A: 1\nContent-Length: 1\r\n\r\nx"},
		{name: "HEAD", req: head, in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"},
		{name: "head not all buffered", req: post, in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"},
	} {
		// Every case twice: with the header lines kept in a request's scratch, and in a
		// string of their own (a head too large for the scratch).
		scratches := map[string][]byte{"scratch": new(responseValues).block[:], "no scratch": nil}
		for sname, scratch := range scratches {
			t.Run(tc.name+"/"+sname, func(t *testing.T) { testReadHeadFastCase(t, tc.req, tc.in, tc.fast, tc.header, tc.body, scratch) })
		}
	}
}

func testReadHeadFastCase(t *testing.T, req *http.Request, in string, fast bool, header http.Header, wantBody string, scratch []byte) {
	c := &upConn{br: bufio.NewReaderSize(strings.NewReader(in), 4096)}
	if _, err := c.br.Peek(1); err != nil {
		t.Fatal(err)
	}
	buffered := c.br.Buffered()
	res := c.readHeadFast(req, scratch)
	if !fast {
		if res != nil {
			t.Fatalf("parsed %+v; want it left to http.ReadResponse", res)
		}
		if c.br.Buffered() != buffered {
			t.Fatalf("consumed %d bytes; want none", buffered-c.br.Buffered())
		}
		return
	}
	if res == nil {
		t.Fatal("not parsed; want the fast path")
	}
	want, err := http.ReadResponse(bufio.NewReader(strings.NewReader(in)), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != want.StatusCode || res.ContentLength != want.ContentLength || res.Close || res.ProtoMinor != 1 {
		t.Errorf("status %d, length %d, close %v; http.ReadResponse says %d, %d", res.StatusCode, res.ContentLength, res.Close,
			want.StatusCode, want.ContentLength)
	}
	if got := res.Header; !equalHeader(got, header) || !equalHeader(got, want.Header) {
		t.Errorf("header %v; want %v (http.ReadResponse: %v)", got, header, want.Header)
	}
	body, err := io.ReadAll(&fixedBody{r: c.br, n: res.ContentLength})
	if err != nil || string(body) != wantBody {
		t.Errorf("body %q, %v; want %q", body, err, wantBody)
	}
}

// A connection's next response reuses the header storage, so each response's header must
// be what was sent, not a mix.
func TestReadHeadFastReusesStorageCleanly(t *testing.T) {
	post, _ := http.NewRequest(http.MethodPost, "http://instance/score", nil)
	c := &upConn{br: bufio.NewReader(strings.NewReader(
		"HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 201 Created\r\nX-B: 2\r\nContent-Length: 0\r\n\r\n"))}
	_, _ = c.br.Peek(1)
	first := c.readHeadFast(post, new(responseValues).block[:])
	if first == nil || first.Header.Get("X-A") != "1" {
		t.Fatalf("first %+v", first)
	}
	// The server may still hold the first response's values (it writes them after the
	// handler returns): they must not change with the next response.
	firstValue := first.Header["X-A"][0]
	_, _ = c.br.Discard(1)
	second := c.readHeadFast(post, new(responseValues).block[:])
	if second == nil || second.StatusCode != 201 || second.Header.Get("X-A") != "" || second.Header.Get("X-B") != "2" {
		t.Fatalf("second %+v", second)
	}
	if firstValue != "1" {
		t.Fatalf("the first response's X-A became %q", firstValue)
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w := b[k]
		if len(v) != len(w) {
			return false
		}
		for i := range v {
			if v[i] != w[i] {
				return false
			}
		}
	}
	return true
}
