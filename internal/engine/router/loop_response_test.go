package router

import (
	"strings"
	"testing"
	"time"
)

func TestAppendClientHeadRewritesTheInstanceHead(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n" +
		"X-Request-Id: theirs\r\nAzureml-Model-Deployment: theirs\r\nKeep-Alive: timeout=5\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: 7\r\n\r\n"
	out, rh, ok := appendClientHead(nil, []byte(in), "id-1", "blue", true, time.Unix(1_700_000_000, 0))
	if !ok || rh.status != 200 || rh.framing != framingLength || rh.length != 7 || !rh.keepAlive {
		t.Fatalf("ok %v, head %+v", ok, rh)
	}
	want := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n" +
		"X-Request-Id: id-1\r\nAzureml-Model-Deployment: blue\r\nContent-Length: 7\r\nConnection: close\r\n\r\n"
	if string(out) != want {
		t.Fatalf("head\n%q\nwant\n%q", out, want)
	}
}

func TestAppendClientHeadFraming(t *testing.T) {
	cases := []struct {
		head      string
		ok        bool
		framing   bodyFraming
		keepAlive bool
	}{
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", true, framingChunked, true},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", true, framingChunked, true},
		{"HTTP/1.1 200 OK\r\n\r\n", true, framingClose, false},
		{"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", true, framingLength, false},
		{"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", true, framingLength, true},
		{"HTTP/1.1 204 No Content\r\n\r\n", true, framingNone, true},
		{"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", true, framingLength, false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", false, 0, false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", false, 0, false},
		{"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", false, 0, false},
		{"HTTP/2 200 OK\r\n\r\n", false, 0, false},
		{"HTTP/1.1 20x OK\r\n\r\n", false, 0, false},
		{"HTTP/1.1 101 Switching Protocols\r\n\r\n", false, 0, false},
	}
	for _, tc := range cases {
		_, rh, ok := appendClientHead(nil, []byte(tc.head), "id", "blue", false, time.Unix(1_700_000_000, 0))
		if ok != tc.ok || ok && (rh.framing != tc.framing || rh.keepAlive != tc.keepAlive) {
			t.Errorf("%q: ok %v framing %v keepAlive %v, want ok %v framing %v keepAlive %v",
				tc.head, ok, rh.framing, rh.keepAlive, tc.ok, tc.framing, tc.keepAlive)
		}
	}
}

func TestChunkScannerFindsTheEndInAnyPieces(t *testing.T) {
	body := "4;a=b\r\nabcd\r\n1A\r\n" + strings.Repeat("z", 26) + "\r\n0\r\nX-T: 1\r\n\r\n"
	next := "HTTP/1.1 200 OK\r\n"
	for size := 1; size <= len(body); size++ {
		var s chunkScanner
		stream := body + next
		consumed, done := 0, false
		for !done && consumed < len(stream) {
			piece := stream[consumed:min(consumed+size, len(stream))]
			n, d, ok := s.scan([]byte(piece))
			if !ok {
				t.Fatalf("pieces of %d: rejected at %d", size, consumed+n)
			}
			consumed += n
			done = d
		}
		if !done || consumed != len(body) {
			t.Fatalf("pieces of %d: done %v after %d bytes, want the end after %d", size, done, consumed, len(body))
		}
	}
	for _, bad := range []string{"x\r\n", "\r\n", "4\r\nabcdXY", "4\nabcd", "0\r\n\r\r", "1234567890abcdef0\r\n"} {
		var s chunkScanner
		if _, _, ok := s.scan([]byte(bad)); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestAppendChunk(t *testing.T) {
	if got := string(appendChunk(nil, []byte(strings.Repeat("a", 26)))); got != "1a\r\n"+strings.Repeat("a", 26)+"\r\n" {
		t.Fatalf("chunk %q", got)
	}
}
