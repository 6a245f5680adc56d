package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// Endpoint autoscaling (DESIGN 4 and 9): gauges of each deployment's desired and ready
// instances, requests in flight and held requests, read from the engine at scrape time, and
// histograms of hold times and cold starts, and a counter of decisions, recorded as they
// happen.

// EndpointSource is the read side of the engine's endpoints; a Source that also satisfies it
// gets the endpoint gauges.
type EndpointSource interface {
	ListEndpoints(ctx context.Context, workspace string) ([]api.Endpoint, error)
}

var (
	endpointInstancesDesc = prometheus.NewDesc(Namespace+"_endpoint_instances",
		"Instances of each online deployment: kind=\"desired\" is the count the engine keeps it at (instance_count or the autoscaler's decision), kind=\"ready\" those receiving traffic.",
		[]string{"workspace", "endpoint", "deployment", "kind"}, nil)
	endpointInFlightDesc = prometheus.NewDesc(Namespace+"_endpoint_requests_in_flight",
		"Requests the router has at each deployment's instances now.",
		[]string{"workspace", "endpoint", "deployment"}, nil)
	endpointHeldDesc = prometheus.NewDesc(Namespace+"_endpoint_held_requests",
		"Requests the router holds for a deployment now, waiting for an instance with room (the hold queue's depth).",
		[]string{"workspace", "endpoint", "deployment"}, nil)
)

// holdBuckets: a held request waits from a few milliseconds (a slot frees) to a cold start
// (max_queue_wait_ms, at most 10 minutes).
var holdBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 15) // 1 ms .. ~6 min

// endpointFamilies are the recorded endpoint families.
type endpointFamilies struct {
	hold      *prometheus.HistogramVec
	coldStart *prometheus.HistogramVec
	decisions *prometheus.CounterVec
}

func newEndpointFamilies() endpointFamilies {
	return endpointFamilies{
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "endpoint_hold_duration_seconds",
			Help:    "How long the router held a request of an autoscaled deployment before an instance took it (outcome=\"served\") or it was answered without one (outcome=\"refused\": 429 past max_queue_wait_ms, 503 on a start error, or the client left).",
			Buckets: holdBuckets,
		}, []string{"workspace", "endpoint", "deployment", "outcome"}),
		coldStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "endpoint_cold_start_duration_seconds",
			Help:    "An endpoint instance's start by phase: phase=\"node\" the driver's node, \"process\" starting the command, \"readiness\" from the process's start to its first passed readiness probe.",
			Buckets: latenessBuckets,
		}, []string{"workspace", "endpoint", "deployment", "phase"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "endpoint_scale_decisions_total",
			Help: "Autoscaler decisions that changed a deployment's count, by direction (up or down).",
		}, []string{"workspace", "endpoint", "deployment", "direction"}),
	}
}

func (f endpointFamilies) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.hold, f.coldStart, f.decisions}
}

// ScaleDecision records an autoscaler decision that changed a deployment's count; endpoint
// is "workspace/name".
func (m *Metrics) ScaleDecision(endpoint, deployment string, from, to int64) {
	ws, name := splitCompute(endpoint)
	dir := "up"
	if to < from {
		dir = "down"
	}
	m.endpoint.decisions.WithLabelValues(ws, name, deployment, dir).Inc()
}

// HoldTime records how long a held request waited.
func (m *Metrics) HoldTime(endpoint, deployment string, wait time.Duration, served bool) {
	ws, name := splitCompute(endpoint)
	outcome := "refused"
	if served {
		outcome = "served"
	}
	m.endpoint.hold.WithLabelValues(ws, name, deployment, outcome).Observe(max(wait, 0).Seconds())
}

// ColdStart records one instance start by phase.
func (m *Metrics) ColdStart(endpoint, deployment string, node, process, readiness time.Duration) {
	ws, name := splitCompute(endpoint)
	m.endpoint.coldStart.WithLabelValues(ws, name, deployment, "node").Observe(max(node, 0).Seconds())
	m.endpoint.coldStart.WithLabelValues(ws, name, deployment, "process").Observe(max(process, 0).Seconds())
	m.endpoint.coldStart.WithLabelValues(ws, name, deployment, "readiness").Observe(max(readiness, 0).Seconds())
}

// endpointCollector reads the endpoint gauges from the engine at scrape time.
type endpointCollector struct {
	workspaces func(ctx context.Context) ([]api.Workspace, error)
	src        EndpointSource
}

func (c *endpointCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- endpointInstancesDesc
	ch <- endpointInFlightDesc
	ch <- endpointHeldDesc
}

func (c *endpointCollector) Collect(ch chan<- prometheus.Metric) {
	ctx := context.Background()
	workspaces, err := c.workspaces(ctx)
	if err != nil {
		return // the state collector reports scrape errors
	}
	for _, ws := range workspaces {
		eps, err := c.src.ListEndpoints(ctx, ws.Name)
		if err != nil {
			continue
		}
		for _, ep := range eps {
			for dn, d := range ep.Deployments {
				ch <- prometheus.MustNewConstMetric(endpointInstancesDesc, prometheus.GaugeValue, float64(d.DesiredInstances), ws.Name, ep.Name, dn, "desired")
				ch <- prometheus.MustNewConstMetric(endpointInstancesDesc, prometheus.GaugeValue, float64(d.ReadyInstances), ws.Name, ep.Name, dn, "ready")
				ch <- prometheus.MustNewConstMetric(endpointInFlightDesc, prometheus.GaugeValue, float64(d.RequestsInFlight), ws.Name, ep.Name, dn)
				ch <- prometheus.MustNewConstMetric(endpointHeldDesc, prometheus.GaugeValue, float64(d.HeldRequests), ws.Name, ep.Name, dn)
			}
		}
	}
}
