// Package routertest is the scoring router's conformance table: one set of cases (traffic
// split, the pin header, credentials, 404, 429, 503, the request timeout, the retry on
// another instance, the headers the router sets and drops, keep-alive, pipelining) run
// through real connections against every way the router is served, as driver/drivertest
// is for node drivers.
//
// A serving path is a Serve function; Run runs every case against it, and RunTLS runs
// them again over TLS (the listener a tls.NewListener, the client pinning its CA):
//
//	func TestCasesOnNetHTTP(t *testing.T) {
//		routertest.Run(t, func(t testing.TB, ln net.Listener, p routertest.Parts) func() {
//			srv := &http.Server{Handler: p.Handler}
//			go func() { _ = srv.Serve(ln) }()
//			return func() { _ = srv.Close() }
//		})
//	}
package routertest

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	testclock "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// failsafe bounds every wait so a bug hangs nothing; no case asserts on how long anything
// takes.
const failsafe = 10 * time.Second

// The endpoints' keys.
const (
	primaryKey   = "primary-key-0123456789"
	secondaryKey = "secondary-key-9876543210"
)

// Parts are what a serving path serves: the router, and Handler, the router wrapped so
// that the table learns when a request it served is over (its slot released and its
// statistics counted). A path that answers some requests without Handler (the event
// loops) must call Observe for each of them once it is over, as LoopServer.Observe does.
type Parts struct {
	Router  *router.Router
	Handler http.Handler
	Observe func(endpoint, deployment string, status int, elapsed time.Duration)
	// TLS is the server's TLS configuration when the table runs over TLS (RunTLS), nil
	// otherwise. The listener is plain TCP either way: a server that serves a TLS
	// listener wraps it (tls.NewListener).
	TLS *tls.Config
}

// Serve starts serving p on ln and returns what stops it.
type Serve func(t testing.TB, ln net.Listener, p Parts) (stop func())

// Run runs every case of the table, each as a subtest on its own router and server.
func Run(t *testing.T, serve Serve) { run(t, serve, nil) }

// RunTLS runs every case of the table over TLS: serve gets Parts.TLS, with a certificate
// made as the engine makes its own (tlsconfig), and the client pins its CA. The instance
// sees X-Forwarded-Proto: https.
func RunTLS(t *testing.T, serve Serve) {
	server, client, err := tlsconfig.Pair(t.TempDir(), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	run(t, serve, &tlsConfigs{server: server, client: client})
}

// tlsConfigs are the two sides of the table's TLS.
type tlsConfigs struct{ server, client *tls.Config }

func run(t *testing.T, serve Serve, tc *tlsConfigs) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(&env{t: t, serve: serve, tls: tc, over: make(chan struct{}, 1024)})
		})
	}
}

type testCase struct {
	name string
	run  func(e *env)
}

// env is one case's world: its router on a fake clock, served on a loopback listener.
type env struct {
	t        *testing.T
	serve    Serve
	tls      *tlsConfigs // nil: plain HTTP
	r        *router.Router
	clk      *testclock.FakeClock
	url      string
	addr     string
	accepted atomic.Int64 // client connections accepted
	over     chan struct{}
	client   *http.Client
}

// start makes the router with opts (on a fake clock, logging to the test), gives it eps
// and serves it.
func (e *env) start(opts router.Options, eps ...router.Endpoint) {
	e.t.Helper()
	e.clk = testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	opts.Clock = e.clk
	if opts.Logger == nil {
		opts.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{e.t}})
	}
	e.r = router.New(opts)
	e.t.Cleanup(e.r.Close)
	for _, ep := range eps {
		e.r.SetEndpoint(ep)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	e.url = e.proto() + "://" + e.addr
	transport := &http.Transport{ExpectContinueTimeout: failsafe}
	var serverTLS *tls.Config
	if e.tls != nil {
		serverTLS = e.tls.server
		transport.TLSClientConfig = e.tls.client
	}
	p := Parts{
		TLS:    serverTLS,
		Router: e.r,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			defer func() { e.over <- struct{}{} }()
			e.r.ServeHTTP(w, req)
		}),
		Observe: func(string, string, int, time.Duration) { e.over <- struct{}{} },
	}
	stop := e.serve(e.t, &countingListener{Listener: ln, accepted: &e.accepted}, p)
	e.t.Cleanup(stop)
	e.client = &http.Client{Transport: transport}
	e.t.Cleanup(e.client.CloseIdleConnections)
}

// proto is the scheme the client speaks, what the instance sees in X-Forwarded-Proto.
func (e *env) proto() string {
	if e.tls != nil {
		return "https"
	}
	return "http"
}

// finished waits until n more requests are over on the router's side.
func (e *env) finished(n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		wait(e.t, e.over, "a request to be over")
	}
}

// stats is the statistics of deployment dep of endpoint "ep".
func (e *env) stats(dep string) router.DeploymentStats { return e.r.Stats("ep")[dep] }

// response is what the client got.
type response struct {
	status  int
	header  http.Header
	trailer http.Header
	body    string
	err     error // reading the body
}

func (r *response) String() string {
	return http.StatusText(r.status) + " " + r.body
}

// request is a scoring request for endpoint "ep" with key (none when empty) and body.
func (e *env) request(key, body string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, e.url+router.ScoringPath("ep"), strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req
}

// do sends req and reads its response whole.
func (e *env) do(req *http.Request) *response {
	e.t.Helper()
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return &response{status: res.StatusCode, header: res.Header, trailer: res.Trailer, body: string(body), err: err}
}

// post sends a scoring request to "ep" and waits until the router is over with it.
func (e *env) post(key, body string) *response {
	e.t.Helper()
	res := e.do(e.request(key, body))
	e.finished(1)
	return res
}

// doAsync sends req on its own goroutine.
func (e *env) doAsync(req *http.Request) <-chan *response {
	ch := make(chan *response, 1)
	go func() {
		res, err := e.client.Do(req)
		if err != nil {
			ch <- &response{err: err}
			return
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		ch <- &response{status: res.StatusCode, header: res.Header, trailer: res.Trailer, body: string(body), err: err}
	}()
	return ch
}

// dial opens a client connection, closed when the case ends, whose reads give up after
// failsafe.
func (e *env) dial() net.Conn {
	e.t.Helper()
	var c net.Conn
	var err error
	if e.tls != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: failsafe}, "tcp", e.addr, e.tls.client)
	} else {
		c, err = net.Dial("tcp", e.addr)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(failsafe))
	return c
}

func (e *env) expectStatus(res *response, want int) {
	e.t.Helper()
	if res.err != nil {
		e.t.Fatalf("reading the response: %v", res.err)
	}
	if res.status != want {
		e.t.Fatalf("status = %d, want %d (body %q)", res.status, want, res.body)
	}
}

// expectError checks that res is the router's error envelope with status and code, and
// returns it (a value: errcheck would have every caller check a *router.Error).
func (e *env) expectError(res *response, status int, code router.ErrorCode) router.Error {
	e.t.Helper()
	e.expectStatus(res, status)
	if ct := res.header.Get("Content-Type"); ct != "application/json" {
		e.t.Fatalf("error Content-Type = %q, want application/json (body %q)", ct, res.body)
	}
	var body router.ErrorBody
	if err := json.Unmarshal([]byte(res.body), &body); err != nil || body.Error == nil {
		e.t.Fatalf("error body %q is not an error envelope: %v", res.body, err)
	}
	if body.Error.Code != code {
		e.t.Fatalf("error code = %q, want %q (body %q)", body.Error.Code, code, res.body)
	}
	return *body.Error
}

// rawScoreRequest is a scoring request for "ep" with the primary key, the header lines
// in extra (each ending in CRLF) and the body {}.
func rawScoreRequest(extra string) string {
	return "POST /ep/score HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + primaryKey + "\r\n" + extra +
		"Content-Length: 2\r\n\r\n{}"
}

// readResponse reads one response from br whole.
func (e *env) readResponse(br *bufio.Reader) *response {
	e.t.Helper()
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	return &response{status: res.StatusCode, header: res.Header, trailer: res.Trailer, body: string(body), err: err}
}

func wait[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(failsafe):
		t.Fatalf("gave up waiting for %s", what)
		var zero T
		return zero
	}
}

// sequence is a Rand that returns vals in order and fails the test when they run out.
func sequence(t testing.TB, vals ...float64) func() float64 {
	var mu sync.Mutex
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		if len(vals) == 0 {
			t.Error("Rand called more often than the case expected")
			return 0
		}
		v := vals[0]
		vals = vals[1:]
		return v
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// keyEndpoint is endpoint name with the two test keys, traffic and deps.
func keyEndpoint(name string, traffic map[string]int, deps ...*router.Deployment) router.Endpoint {
	e := router.Endpoint{
		Name:        name,
		AuthMode:    router.AuthModeKey,
		Keys:        [2]string{primaryKey, secondaryKey},
		Traffic:     traffic,
		Deployments: map[string]*router.Deployment{},
	}
	for _, d := range deps {
		e.Deployments[d.Name] = d
	}
	return e
}

// deployment is a deployment with one instance per backend.
func deployment(name string, maxConc int, bs ...*testbackend.Backend) *router.Deployment {
	d := &router.Deployment{Name: name, MaxConcurrentPerInstance: maxConc, RequestTimeout: time.Minute}
	for i, b := range bs {
		d.Backends = append(d.Backends, instance(b, name+"-"+string(rune('0'+i))))
	}
	return d
}

// instance is b as a ready instance of a deployment, named id.
func instance(b *testbackend.Backend, id string) router.Backend {
	return router.Backend{ID: id, URL: b.Address(), Ready: true}
}
