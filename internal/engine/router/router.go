package router

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/httpsyntax"
	"k8s.io/utils/clock"
)

// Auth modes of an endpoint.
const (
	AuthModeKey      = "key"
	AuthModeAMLToken = "aml_token"
)

// Defaults applied to a Deployment that leaves a setting at zero.
const (
	DefaultMaxConcurrentPerInstance = 1
	DefaultRequestTimeout           = 5 * time.Second
	// DefaultMaxMirrorBodyBytes is the largest request body that is copied to a mirror.
	DefaultMaxMirrorBodyBytes = 10 << 20
)

// DeploymentHeader pins a request to a deployment and names, on the response, the
// deployment that served it.
const DeploymentHeader = "azureml-model-deployment"

// RequestIDHeader carries the request id to the instance and back to the client.
const RequestIDHeader = "X-Request-Id"

// Backend is one instance of a deployment.
type Backend struct {
	ID    string
	URL   *url.URL
	Ready bool
}

// Deployment is one deployment of an endpoint and its instances.
type Deployment struct {
	Name     string
	Backends []Backend
	// MaxConcurrentPerInstance is max_concurrent_requests_per_instance (0 means 1).
	MaxConcurrentPerInstance int
	// RequestTimeout is request_timeout_ms (0 means 5 s). It runs from when the request is
	// sent to an instance, not while it is held.
	RequestTimeout time.Duration
	// Hold, for an autoscaled deployment, holds requests that find no instance with room
	// (hold.go); nil answers them 503 or 429 at once.
	Hold *Hold
}

// Endpoint is the routing configuration of one online endpoint.
type Endpoint struct {
	// Name is the first path segment: requests arrive at ScoringPath(Name).
	Name string
	// AuthMode is "key" (the default when empty) or "aml_token". Any other value rejects
	// every request.
	AuthMode string
	// Keys are the primary and secondary keys (key mode). An empty key matches nothing.
	Keys [2]string
	// TokenVerifier decides aml_token credentials; it must be safe for concurrent use.
	// Nil rejects every request.
	TokenVerifier func(token string) bool
	// Traffic maps deployment to percent; the values sum to 0 or 100.
	Traffic map[string]int
	// Mirror maps at most one deployment to the percent of live requests copied to it.
	Mirror map[string]int
	// Deployments are keyed by deployment name; the key wins over Deployment.Name.
	Deployments map[string]*Deployment
}

// ScoringPath is the path under which an endpoint is served.
func ScoringPath(endpoint string) string { return "/" + endpoint + "/score" }

// Options configure a Router.
type Options struct {
	Logger hclog.Logger
	// Rand returns a float in [0, 1); it must be safe for concurrent use. It defaults to
	// math/rand/v2's Float64. See the package documentation for when it is called.
	Rand func() float64
	// Transport carries requests to instances. It defaults to NewTransport().
	Transport http.RoundTripper
	// Clock times everything the router waits for or dates: request and mirror timeouts,
	// the hold queue's wait, idle connections' age, the Date header, and a LoopServer's
	// pauses (and its fallback lean server's, unless that has a Clock of its own). It
	// defaults to the real clock. Socket deadlines stay on the wall clock.
	Clock clock.WithDelayedExecution
	// MaxMirrorBodyBytes bounds the body buffered for a mirror copy (default 10 MiB).
	MaxMirrorBodyBytes int64
	// OnHoldChange, when set, is called (it must not block) each time a request of a
	// deployment is held or stops being held: tests wait on it for a count of held
	// requests (Stats' Held) rather than poll.
	OnHoldChange func(endpoint, deployment string)
}

// Router is the scoring router. It is safe for concurrent use.
type Router struct {
	log       hclog.Logger
	rand      func() float64
	clock     clock.WithDelayedExecution
	transport http.RoundTripper
	proxy     *httputil.ReverseProxy
	maxMirror int64
	onHold    func(endpoint, deployment string)
	// direct: the transport is the router's own default, so the common request may take
	// the router's own client instead (upstream.go). A caller's transport gets every
	// request.
	direct bool

	// attempts recycles the per-request state of the router's own client path.
	attempts sync.Pool

	table atomic.Pointer[table]
	mu    sync.Mutex // serializes writers of table

	// Mirror copies run on goroutines under ctx; Close cancels and waits for them.
	ctx      context.Context
	cancel   context.CancelFunc
	mirrorMu sync.Mutex
	closed   bool
	mirrors  sync.WaitGroup
}

// New builds a router with an empty table.
func New(opts Options) *Router {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	direct := opts.Transport == nil
	if direct {
		opts.Transport = NewTransport()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxMirrorBodyBytes <= 0 {
		opts.MaxMirrorBodyBytes = DefaultMaxMirrorBodyBytes
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Router{
		log:       opts.Logger.Named("router"),
		rand:      opts.Rand,
		clock:     opts.Clock,
		transport: opts.Transport,
		maxMirror: opts.MaxMirrorBodyBytes,
		onHold:    opts.OnHoldChange,
		direct:    direct,
		ctx:       ctx,
		cancel:    cancel,
	}
	r.proxy = r.newProxy()
	r.table.Store(&table{endpoints: map[string]*endpointState{}})
	return r
}

// NewTransport is the transport the router uses by default: tuned for many concurrent
// requests to a few loopback or LAN instances. It ignores proxy environment variables,
// keeps plenty of idle connections per instance and never adds or strips compression.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ReadBufferSize:        16 << 10,
		WriteBufferSize:       16 << 10,
	}
}

// SetEndpoint adds the endpoint or replaces the one with the same name, atomically:
// every request sees either the old or the new configuration. The router keeps its own
// copy, so the caller may reuse e. In-flight counts and statistics carry over for
// deployments and instances that keep their name (and, for instances, their URL).
func (r *Router) SetEndpoint(e Endpoint) {
	if e.Name == "" {
		r.log.Error("endpoint without a name ignored")
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.table.Load()
	st := r.build(e, old.endpoints[e.Name])
	next := make(map[string]*endpointState, len(old.endpoints)+1)
	for k, v := range old.endpoints {
		next[k] = v
	}
	next[e.Name] = st
	r.table.Store(&table{endpoints: next})
	closeDroppedPools(old.endpoints[e.Name], st)
	for _, d := range st.deployments {
		if d.hold != nil {
			d.hold.signal() // held requests look at the new table
		}
	}
	r.log.Debug("endpoint set", "endpoint", e.Name, "auth_mode", st.authMode,
		"deployments", st.names, "traffic", e.Traffic, "mirror", e.Mirror)
}

// RemoveEndpoint removes the endpoint; its requests get 404 from then on, requests in
// flight finish normally. Removing an unknown endpoint does nothing.
func (r *Router) RemoveEndpoint(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.table.Load()
	if _, ok := old.endpoints[name]; !ok {
		return
	}
	next := make(map[string]*endpointState, len(old.endpoints))
	for k, v := range old.endpoints {
		if k != name {
			next[k] = v
		}
	}
	r.table.Store(&table{endpoints: next})
	closeDroppedPools(old.endpoints[name], nil)
	for _, d := range old.endpoints[name].deployments {
		if d.hold != nil {
			d.hold.signal() // held requests find the endpoint gone
		}
	}
	r.log.Debug("endpoint removed", "endpoint", name)
}

// Stats returns the counters of each deployment of the endpoint, or nil for an unknown
// endpoint.
func (r *Router) Stats(endpoint string) map[string]DeploymentStats {
	ep := r.table.Load().endpoints[endpoint]
	if ep == nil {
		return nil
	}
	out := make(map[string]DeploymentStats, len(ep.deployments))
	for name, d := range ep.deployments {
		s := d.stats.snapshot()
		for _, in := range d.instances {
			s.InFlight += in.load.Load()
		}
		if d.hold != nil {
			s.Held = d.hold.held.Load()
		}
		out[name] = s
	}
	return out
}

// InstanceInFlight returns the requests in flight on one instance of a deployment (ready or
// draining); known is false when the table does not hold the instance.
func (r *Router) InstanceInFlight(endpoint, deployment, id string) (n int64, known bool) {
	ep := r.table.Load().endpoints[endpoint]
	if ep == nil || ep.deployments[deployment] == nil {
		return 0, false
	}
	for _, in := range ep.deployments[deployment].instances {
		if in.id == id {
			return in.load.Load(), true
		}
	}
	return 0, false
}

// Close stops mirror copies still running, waits for them, and closes idle connections.
// Call it after the listener stopped; requests served after Close are not mirrored.
func (r *Router) Close() {
	r.mirrorMu.Lock()
	r.closed = true
	r.mirrorMu.Unlock()
	r.cancel()
	r.mirrors.Wait()
	for _, ep := range r.table.Load().endpoints {
		closeDroppedPools(ep, nil)
	}
	if t, ok := r.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// table is one immutable snapshot of the routing configuration.
type table struct {
	endpoints map[string]*endpointState
}

type endpointState struct {
	name        string
	authMode    string
	keyDigests  [][sha256.Size]byte
	verify      func(string) bool
	deployments map[string]*deploymentState
	names       []string // sorted deployment names, for error messages
	weighted    []weightedDeployment
	totalWeight int
	mirror      *deploymentState
	mirrorPct   int
	// loopable: the event-loop server may serve the endpoint's usual requests itself
	// (loop.go): nothing is mirrored and every instance speaks plain HTTP.
	loopable bool
}

// weightedDeployment covers [previous cum, cum) of the traffic total.
type weightedDeployment struct {
	cum int
	dep *deploymentState
}

type deploymentState struct {
	name    string
	ready   []*instance // the instances that may be chosen
	max     int64
	timeout time.Duration
	stats   *counters
	rr      *atomic.Uint64
	byKey   map[string]*instance // every instance by key, ready or not
	// instances lists every instance (for Stats).
	instances []*instance
	// hold is set for a deployment that holds requests (Deployment.Hold).
	hold *holdState
}

// instance is one backend. Its load is shared by every snapshot that has the same
// instance, so a table update never resets it.
type instance struct {
	id   string
	url  *url.URL
	load *atomic.Int64
	// pool holds idle connections of the router's own client; like load it carries
	// over table updates, and it is closed when the instance leaves the table.
	pool *connPool
	// direct: the instance speaks plain HTTP, so the router's own client can reach it
	// at addr (host:port); basePath is its escaped base path without a trailing slash,
	// plainBase whether that needs no re-escaping.
	direct    bool
	addr      string
	basePath  string
	plainBase bool
	scoreURI  string // basePath + "/score", when plainBase
}

func instanceKey(b Backend) string {
	u := ""
	if b.URL != nil {
		u = b.URL.String()
	}
	return b.ID + "\x00" + u
}

// build turns e into an immutable endpoint state, reusing the counters and in-flight
// counts of prev.
func (r *Router) build(e Endpoint, prev *endpointState) *endpointState {
	st := &endpointState{
		name:        e.Name,
		authMode:    e.AuthMode,
		verify:      e.TokenVerifier,
		deployments: make(map[string]*deploymentState, len(e.Deployments)),
	}
	if st.authMode == "" {
		st.authMode = AuthModeKey
	}
	switch st.authMode {
	case AuthModeKey:
		for _, k := range e.Keys {
			if k != "" {
				st.keyDigests = append(st.keyDigests, sha256.Sum256([]byte(k)))
			}
		}
		if len(st.keyDigests) == 0 {
			r.log.Warn("endpoint has no keys, every request will be rejected", "endpoint", e.Name)
		}
	case AuthModeAMLToken:
		if st.verify == nil {
			r.log.Warn("endpoint has no token verifier, every request will be rejected", "endpoint", e.Name)
		}
	default:
		r.log.Error("unknown auth mode, every request will be rejected", "endpoint", e.Name, "auth_mode", st.authMode)
	}

	for name, d := range e.Deployments {
		if d == nil {
			continue
		}
		var old *deploymentState
		if prev != nil {
			old = prev.deployments[name]
		}
		st.deployments[name] = buildDeployment(name, d, old)
		st.names = append(st.names, name)
	}
	sort.Strings(st.names)

	// Traffic in name order, so a given Rand value always picks the same deployment.
	tnames := make([]string, 0, len(e.Traffic))
	for name, pct := range e.Traffic {
		if pct > 0 {
			tnames = append(tnames, name)
		}
	}
	sort.Strings(tnames)
	for _, name := range tnames {
		dep := st.deployments[name]
		if dep == nil {
			// Validation upstream forbids this; fail visibly rather than shift the share.
			r.log.Warn("traffic names an unknown deployment, its share will get 503", "endpoint", e.Name, "deployment", name)
			dep = &deploymentState{name: name, stats: &counters{}, rr: &atomic.Uint64{}}
		}
		st.totalWeight += e.Traffic[name]
		st.weighted = append(st.weighted, weightedDeployment{cum: st.totalWeight, dep: dep})
	}

	mnames := make([]string, 0, len(e.Mirror))
	for name, pct := range e.Mirror {
		if pct > 0 {
			mnames = append(mnames, name)
		}
	}
	sort.Strings(mnames)
	if len(mnames) > 1 {
		r.log.Warn("more than one mirror deployment, only the first is used", "endpoint", e.Name, "mirror", mnames)
	}
	if len(mnames) > 0 {
		if dep := st.deployments[mnames[0]]; dep != nil {
			st.mirror = dep
			st.mirrorPct = min(e.Mirror[mnames[0]], 100)
		} else {
			r.log.Warn("mirror names an unknown deployment, not mirroring", "endpoint", e.Name, "deployment", mnames[0])
		}
	}
	st.loopable = r.direct && st.mirror == nil
	for _, d := range st.deployments {
		for _, in := range d.instances {
			st.loopable = st.loopable && in.direct && in.plainBase
		}
	}
	return st
}

func buildDeployment(name string, d *Deployment, old *deploymentState) *deploymentState {
	ds := &deploymentState{
		name:    name,
		max:     int64(d.MaxConcurrentPerInstance),
		timeout: d.RequestTimeout,
		byKey:   make(map[string]*instance, len(d.Backends)),
	}
	if ds.max <= 0 {
		ds.max = DefaultMaxConcurrentPerInstance
	}
	if ds.timeout <= 0 {
		ds.timeout = DefaultRequestTimeout
	}
	if old != nil {
		ds.stats, ds.rr = old.stats, old.rr
	} else {
		ds.stats, ds.rr = &counters{}, &atomic.Uint64{}
	}
	if d.Hold != nil {
		if old != nil && old.hold != nil {
			ds.hold = old.hold
		} else {
			ds.hold = &holdState{}
		}
		cfg := *d.Hold
		cfg.MaxHeld = max(cfg.MaxHeld, 1)
		if cfg.MaxWait <= 0 {
			cfg.MaxWait = time.Millisecond
		}
		ds.hold.cfg.Store(&cfg)
	}
	for _, b := range d.Backends {
		key := instanceKey(b)
		if _, dup := ds.byKey[key]; dup || b.URL == nil {
			continue
		}
		in := &instance{id: b.ID}
		u := *b.URL
		in.url = &u
		if old != nil && old.byKey[key] != nil {
			in.load, in.pool = old.byKey[key].load, old.byKey[key].pool
		} else {
			in.load, in.pool = &atomic.Int64{}, &connPool{}
		}
		if u.Scheme == "http" && u.Host != "" {
			in.direct, in.addr = true, u.Host
			if u.Port() == "" {
				in.addr = net.JoinHostPort(u.Hostname(), "80")
			}
			in.basePath = strings.TrimSuffix(u.EscapedPath(), "/")
			in.plainBase = u.RawPath == "" && httpsyntax.PlainPath(in.basePath)
			in.scoreURI = in.basePath + "/score"
		}
		ds.byKey[key] = in
		ds.instances = append(ds.instances, in)
		if b.Ready {
			ds.ready = append(ds.ready, in)
		}
	}
	return ds
}

// closeDroppedPools closes the connection pools of prev's instances that next (nil when
// the endpoint is gone) no longer has. Requests in flight on them finish; their
// connections are closed instead of kept.
func closeDroppedPools(prev, next *endpointState) {
	if prev == nil {
		return
	}
	for name, d := range prev.deployments {
		var kept *deploymentState
		if next != nil {
			kept = next.deployments[name]
		}
		for key, in := range d.byKey {
			if kept == nil || kept.byKey[key] == nil {
				in.pool.close()
			}
		}
	}
}

// pick chooses a deployment by weight for x in [0, 1); nil when no deployment has traffic.
func (ep *endpointState) pick(x float64) *deploymentState {
	if ep.totalWeight == 0 {
		return nil
	}
	target := int(x * float64(ep.totalWeight))
	for _, w := range ep.weighted {
		if target < w.cum {
			return w.dep
		}
	}
	return ep.weighted[len(ep.weighted)-1].dep // x >= 1 from a sloppy Rand
}

// acquire reserves a slot on the ready instance with the fewest requests in flight,
// skipping exclude; ties go round-robin. It returns nil when no ready instance has room.
// It never blocks: a lost race for a slot just looks again.
func (d *deploymentState) acquire(exclude *instance) *instance {
	n := len(d.ready)
	if n == 0 {
		return nil
	}
	// A retry (exclude set) does not advance the rotation: it is the same request.
	var turn uint64
	if exclude == nil {
		turn = d.rr.Add(1) - 1
	} else {
		turn = d.rr.Load()
	}
	start := int(turn % uint64(n))
	for {
		var best *instance
		var bestLoad int64
		for i := 0; i < n; i++ {
			j := start + i
			if j >= n {
				j -= n
			}
			in := d.ready[j]
			if in == exclude {
				continue
			}
			l := in.load.Load()
			if l >= d.max {
				continue
			}
			if best == nil || l < bestLoad {
				best, bestLoad = in, l
			}
		}
		if best == nil {
			return nil
		}
		if best.load.CompareAndSwap(bestLoad, bestLoad+1) {
			return best
		}
	}
}

func (in *instance) release() { in.load.Add(-1) }
