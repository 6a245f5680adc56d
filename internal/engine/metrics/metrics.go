package metrics

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// Namespace prefixes every metric family of the engine.
const Namespace = "mlcompute"

// Source is the read side of the engine that the collector reads at scrape time;
// *engine.Engine satisfies it.
type Source interface {
	ListWorkspaces(ctx context.Context) ([]api.Workspace, error)
	ListComputes(ctx context.Context, workspace string) ([]api.Compute, error)
	ListJobs(ctx context.Context, workspace string) ([]api.Job, error)
}

// Options configure Metrics.
type Options struct {
	// Source is read at every scrape for nodes and jobs; nil leaves those families empty.
	Source Source
	// Clock times API and scoring requests; the real clock when nil.
	Clock clock.PassiveClock
}

// Metrics holds the engine's metric families in their own registry (with the Go runtime
// and process collectors). It is a Recorder for the engine's node lifecycle.
type Metrics struct {
	clock    clock.PassiveClock
	registry *prometheus.Registry

	nodeCreate   *prometheus.HistogramVec
	nodeRelease  *prometheus.HistogramVec
	lateness     prometheus.Histogram
	apiLatency   *prometheus.HistogramVec
	authFailures *prometheus.CounterVec
	scoring      *prometheus.HistogramVec
	endpoint     endpointFamilies
	// own are the engine's collectors (not the Go runtime's and the process's).
	own []prometheus.Collector
}

var _ Recorder = (*Metrics)(nil)

// Bucket bounds, in seconds. Nodes take seconds (local processes) to minutes (a cluster
// manager's queue); scoring requests may last up to the 180 s request timeout.
var (
	nodeBuckets     = prometheus.ExponentialBuckets(0.25, 2, 14)      // 0.25 s .. ~34 min
	latenessBuckets = prometheus.ExponentialBuckets(0.05, 2, 14)      // 50 ms .. ~7 min
	scoringBuckets  = append(prometheus.DefBuckets, 30, 60, 120, 180) // 5 ms .. 180 s
	apiBuckets      = prometheus.ExponentialBuckets(0.0005, 2.5, 14)  // 0.5 ms .. ~75 s
)

// New builds the metric families and registers them.
func New(opts Options) *Metrics {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &Metrics{
		clock:    opts.Clock,
		registry: prometheus.NewRegistry(),
		nodeCreate: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "node_create_duration_seconds",
			Help:    "Time from a node's creation (preparing) to its being usable (idle); the _count is the number of nodes created.",
			Buckets: nodeBuckets,
		}, []string{"workspace", "compute"}),
		nodeRelease: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "node_release_duration_seconds",
			Help:    "Time from the decision to release a node to its driver confirming it gone; the _count is the number of nodes released.",
			Buckets: nodeBuckets,
		}, []string{"workspace", "compute"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "idle_release_lateness_seconds",
			Help:    "How long after its idle deadline (idle since + scale_down_nodes_after_idle_duration) an idle node was released.",
			Buckets: latenessBuckets,
		}),
		apiLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "api_request_duration_seconds",
			Help:    "Latency of the engine's API requests by method, route pattern and status code.",
			Buckets: apiBuckets,
		}, []string{"method", "route", "code"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "api_auth_failures_total",
			Help: "API requests refused with 401, by reason: missing (no token), unknown (not a token of this engine, or revoked) or expired.",
		}, []string{"reason"}),
		scoring: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "scoring_request_duration_seconds",
			Help:    "Latency of scoring requests through the router by endpoint, deployment and status code; the _count is the number of requests. Requests for no known endpoint have endpoint \"\".",
			Buckets: scoringBuckets,
		}, []string{"endpoint", "deployment", "code"}),
		endpoint: newEndpointFamilies(),
	}
	m.register(m.endpoint.collectors()...)
	m.register(m.nodeCreate, m.nodeRelease, m.lateness, m.apiLatency, m.authFailures, m.scoring)
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if opts.Source != nil {
		m.register(&stateCollector{src: opts.Source})
		if eps, ok := opts.Source.(EndpointSource); ok {
			m.register(&endpointCollector{workspaces: opts.Source.ListWorkspaces, src: eps})
		}
		if arts, ok := opts.Source.(ArtifactSource); ok {
			m.registry.MustRegister(&artifactCollector{src: arts})
		}
	}
	return m
}

func (m *Metrics) register(cs ...prometheus.Collector) {
	m.registry.MustRegister(cs...)
	m.own = append(m.own, cs...)
}

// Describe sends the descriptor of every metric family of the engine's own, without the Go
// runtime's and the process's (the docs check lists them against the engine guide).
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.own {
		c.Describe(ch)
	}
}

// Handler serves the registry in the Prometheus text format (GET /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry is the registry the families live in (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// NodeCreated records a node that became usable.
func (m *Metrics) NodeCreated(compute string, d time.Duration) {
	ws, name := splitCompute(compute)
	m.nodeCreate.WithLabelValues(ws, name).Observe(d.Seconds())
}

// NodeReleased records a node the driver confirmed gone after a release.
func (m *Metrics) NodeReleased(compute string, d time.Duration) {
	ws, name := splitCompute(compute)
	m.nodeRelease.WithLabelValues(ws, name).Observe(d.Seconds())
}

// IdleReleaseLateness records how late past its idle deadline a node was released.
func (m *Metrics) IdleReleaseLateness(d time.Duration) {
	m.lateness.Observe(max(d, 0).Seconds())
}

// ObserveAPI records one API request; route is the route pattern, never the raw path, so
// the label set stays bounded.
func (m *Metrics) ObserveAPI(method, route string, code int, d time.Duration) {
	m.apiLatency.WithLabelValues(method, route, strconv.Itoa(code)).Observe(d.Seconds())
}

// AuthFailure counts one request refused with 401 for reason (missing, unknown, expired):
// the calls of unknown tokens are in no log, so this is where a brute force shows.
func (m *Metrics) AuthFailure(reason string) {
	m.authFailures.WithLabelValues(reason).Inc()
}

// Since is the time elapsed since start on the metrics' clock.
func (m *Metrics) Since(start time.Time) time.Duration { return m.clock.Since(start) }

// Now is the metrics' clock's time.
func (m *Metrics) Now() time.Time { return m.clock.Now() }

func splitCompute(key string) (workspace, name string) {
	ws, name, ok := strings.Cut(key, "/")
	if !ok {
		return "", key
	}
	return ws, name
}
