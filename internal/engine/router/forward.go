package router

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/httpsyntax"
)

// The router's own forwarding path: the request body in memory, the exchange on the
// router's own client (upstream.go), the response copied to the client.

// readBody reads a request body of at most maxBufferedBody bytes into a pooled buffer.
// A larger one (of unknown length: a known one is not even tried) is left to stream: ok
// is false and req.Body reads what was read, then the rest.
func readBody(req *http.Request) (buf *[]byte, body []byte, ok bool, err error) {
	buf = bodyBuffer(req.ContentLength)
	b := *buf
	n := 0
	if req.ContentLength > 0 {
		n, err = io.ReadFull(req.Body, b[:req.ContentLength])
	} else {
		for n < len(b) && err == nil {
			var m int
			m, err = req.Body.Read(b[n:])
			n += m
		}
		if err == io.EOF {
			err = nil
		}
	}
	if err != nil {
		putBodyBuffer(buf)
		return nil, nil, false, err
	}
	if n > maxBufferedBody {
		// The buffer now belongs to req.Body; it is not returned to the pool.
		req.Body = readCloser{io.MultiReader(bytes.NewReader(b[:n]), req.Body), req.Body}
		return nil, nil, false, nil
	}
	return buf, b[:n], true, nil
}

// forward sends the request, its body in memory, to a.in with the router's own client
// and copies the response to w.
func (r *Router) forward(w http.ResponseWriter, req *http.Request, a *attempt, body []byte) {
	a.requestURI = requestURI(req, a.in, a.suffix)
	res, err := r.exchange(req, a, a.in, body)
	if err != nil && isDialError(err) && !a.over() {
		if next := r.retryOn(a, err, func(in *instance) bool { return in.direct }); next != nil {
			a.requestURI = requestURI(req, next, a.suffix)
			res, err = r.exchange(req, a, next, body)
		}
	}
	if err != nil {
		r.upstreamError(w, req.Context(), a, err, false)
		return
	}
	defer res.Body.Close()
	a.status = res.StatusCode

	h := w.Header()
	connHeader := res.Header["Connection"]
	for k, vv := range res.Header {
		switch k {
		case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
			"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
			RequestIDHeader, canonicalDeploymentHeader:
			continue // hop-by-hop, or set by the router
		}
		if len(connHeader) > 0 && headerValuesContainToken(connHeader, k) {
			continue
		}
		h[k] = vv
	}
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	w.WriteHeader(res.StatusCode)

	// A response of unknown length may be a stream: pass each piece on at once. One of
	// known length is flushed once, when the handler returns.
	var flusher http.Flusher
	if ct := res.Header.Get("Content-Type"); res.ContentLength == -1 ||
		len(ct) >= len("text/event-stream") && strings.EqualFold(ct[:len("text/event-stream")], "text/event-stream") {
		flusher, _ = w.(http.Flusher)
	}
	if err := copyResponse(w, res.Body, flusher); err != nil {
		// The status is out: all that is left is to abort the response, so the client
		// sees it cut rather than complete. (A recorder in tests cannot be aborted.)
		if req.Context().Value(http.ServerContextKey) != nil {
			panic(http.ErrAbortHandler)
		}
		return
	}
	if len(res.Trailer) > 0 {
		if flusher, ok := w.(http.Flusher); ok {
			flusher.Flush() // trailers need a chunked response
		}
		for k, vv := range res.Trailer {
			if len(res.Trailer) != announced {
				k = http.TrailerPrefix + k // some were not announced: send all that way
			}
			h[k] = vv
		}
	}
}

// canonicalDeploymentHeader and canonicalRequestIDHeader are the headers as map keys.
var (
	canonicalDeploymentHeader = http.CanonicalHeaderKey(DeploymentHeader)
	canonicalRequestIDHeader  = http.CanonicalHeaderKey(RequestIDHeader)
)

// copyResponse copies the response body to w, flushing after every write when flusher is
// set. Errors of either side are returned.
func copyResponse(w io.Writer, body io.Reader, flusher http.Flusher) error {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// requestURI is the request target on the instance: its base path, the escaped path
// after the endpoint name, and the query.
func requestURI(req *http.Request, in *instance, suffix string) string {
	if suffix == "/score" && in.plainBase && !req.URL.ForceQuery && req.URL.RawQuery == "" {
		return in.scoreURI // the usual request, without an allocation
	}
	var p string
	if in.plainBase && httpsyntax.PlainPath(suffix) {
		p = in.basePath + suffix
	} else {
		u := &url.URL{}
		setTarget(u, in.url, suffix)
		p = u.EscapedPath()
	}
	if req.URL.ForceQuery || req.URL.RawQuery != "" {
		p += "?" + req.URL.RawQuery
	}
	return p
}

// plainQuery reports whether httputil.ReverseProxy would forward the query unchanged:
// no semicolon, only well-formed escapes, and not an excessive number of parameters. Any
// other query takes the proxy, which re-encodes it.
func plainQuery(q string) bool {
	if strings.Count(q, "&") >= 10000 {
		return false
	}
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			return false
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
