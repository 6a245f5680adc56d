package router

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// setTarget points u at the instance base URL followed by the escaped request suffix.
func setTarget(u, base *url.URL, suffix string) {
	u.Scheme, u.Host, u.User, u.Fragment, u.RawFragment = base.Scheme, base.Host, nil, "", ""
	basePath := strings.TrimSuffix(base.Path, "/")
	if strings.IndexByte(suffix, '%') < 0 && base.RawPath == "" {
		u.Path, u.RawPath = basePath+suffix, ""
		return
	}
	unescaped, err := url.PathUnescape(suffix)
	if err != nil { // EscapedPath never yields this; forward it untouched
		unescaped = suffix
	}
	u.Path = basePath + unescaped
	u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + suffix
}

func (r *Router) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      upstream{r: r},
		ModifyResponse: modifyResponse,
		ErrorHandler:   r.proxyError,
		BufferPool:     bufferPool{},
		ErrorLog:       r.log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
}

// rewrite builds the upstream request. The proxy already removed hop-by-hop headers
// (and those named in Connection) and any X-Forwarded-* the client sent.
func rewrite(pr *httputil.ProxyRequest) {
	a := attemptOf(pr.In.Context())
	out := pr.Out
	setTarget(out.URL, a.in.url, a.suffix)
	out.Host = ""
	out.Header.Del("Authorization")
	out.Header.Set(RequestIDHeader, a.requestID)
	pr.SetXForwarded()
	if a.hasBody {
		// Lets the transport replay the body on a fresh connection when a pooled one
		// turns out dead before anything was written.
		out.GetBody = a.getBody
	}
}

// modifyResponse records the status and sets the router's response headers, replacing
// any the instance sent.
func modifyResponse(res *http.Response) error {
	a := attemptOf(res.Request.Context())
	a.status = res.StatusCode
	res.Header.Set(RequestIDHeader, a.requestID)
	res.Header.Set(DeploymentHeader, a.dep.name)
	return nil
}

// proxyError answers a request whose upstream exchange failed before a response.
func (r *Router) proxyError(w http.ResponseWriter, req *http.Request, err error) {
	ctx := req.Context()
	a := attemptOf(ctx)
	h := w.Header()
	h.Set(RequestIDHeader, a.requestID)
	h.Set(DeploymentHeader, a.dep.name)
	r.upstreamError(w, ctx, a, err, false)
}

// upstream is the proxy's transport: the router's transport plus one retry on another
// instance when the chosen one cannot be connected to.
type upstream struct{ r *Router }

func (u upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := u.r.transport.RoundTrip(req)
	if err == nil {
		return res, nil
	}
	ctx := req.Context()
	a := attemptOf(ctx)
	if a == nil || ctx.Err() != nil || !isDialError(err) || a.body.read.Load() {
		return nil, err
	}
	next := u.r.retryOn(a, err, nil)
	if next == nil {
		return nil, err
	}
	retry := req.Clone(ctx)
	setTarget(retry.URL, next.url, a.suffix)
	retry.Host = ""
	if a.hasBody {
		retry.Body = &a.body
	}
	return u.r.transport.RoundTrip(retry)
}

// bufferPool recycles the proxy's copy buffers.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }
