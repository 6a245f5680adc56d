// Package history keeps what the status page plots (DESIGN 9): each compute's nodes and
// jobs and each online deployment's instances and request rate over the last hour, sampled
// every Interval on the engine's clock into a ring of at most one hour per series. It is
// memory only: the history starts when the engine starts and is not kept across restarts.
package history

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

const (
	// Interval is the time between two samples.
	Interval = 10 * time.Second
	// Window is how far back a series goes.
	Window = time.Hour
	// Capacity is the most points one series holds: an hour of samples.
	Capacity = int(Window / Interval)
)

// Snapshot is what one sample reads from the engine.
type Snapshot struct {
	// Computes are keyed "<workspace>/<compute>".
	Computes    map[string]ComputeCounts
	Deployments map[DeploymentKey]DeploymentCounts
}

// ComputeCounts are a compute's nodes (any state), its Queued jobs, and its jobs on nodes
// (Preparing or Running).
type ComputeCounts struct {
	Nodes, Queued, Running int64
}

// DeploymentKey names an online deployment.
type DeploymentKey struct {
	Workspace, Endpoint, Deployment string
}

// DeploymentCounts are a deployment's ready instances and the scoring router's count of
// requests routed to it so far (a counter since the engine's start).
type DeploymentCounts struct {
	Instances int64
	Requests  uint64
}

// History holds the series. Its methods are safe for concurrent use.
type History struct {
	mu          sync.Mutex
	since       time.Time
	last        time.Time // the previous sample, or since
	computes    map[string]*Ring[api.ComputeSample]
	deployments map[DeploymentKey]*deploymentSeries
}

type deploymentSeries struct {
	points *Ring[api.DeploymentSample]
	// requests and at are the router's count at the series' last sample, and its time.
	requests uint64
	at       time.Time
}

// New returns an empty history that starts at start (the engine's start).
func New(start time.Time) *History {
	return &History{
		since: start.UTC(), last: start.UTC(),
		computes: map[string]*Ring[api.ComputeSample]{}, deployments: map[DeploymentKey]*deploymentSeries{},
	}
}

// Record adds the sample s taken at now to every series, starts the series of computes and
// deployments seen for the first time, and drops points older than Window (and series left
// with none). A deployment's request rate is the growth of its request count since its
// previous sample (or, for a new series, since the previous sample of any series: the
// router counts from the engine's start) over the time between; a count that went down
// (the router counted anew) counts from zero, as Prometheus' rate() does.
func (h *History) Record(now time.Time, s Snapshot) {
	now = now.UTC()
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, c := range s.Computes {
		r := h.computes[key]
		if r == nil {
			r = NewRing[api.ComputeSample](Capacity)
			h.computes[key] = r
		}
		r.Push(api.ComputeSample{Time: now, Nodes: c.Nodes, JobsQueued: c.Queued, JobsRunning: c.Running})
	}
	for key, d := range s.Deployments {
		ds := h.deployments[key]
		if ds == nil {
			ds = &deploymentSeries{points: NewRing[api.DeploymentSample](Capacity), at: h.last}
			h.deployments[key] = ds
		}
		ds.points.Push(api.DeploymentSample{Time: now, Instances: d.Instances, RequestRate: Rate(ds.requests, d.Requests, now.Sub(ds.at))})
		ds.requests, ds.at = d.Requests, now
	}
	h.last = now
	h.evict(now)
}

// Rate is the requests per second between two readings of a request counter taken elapsed
// apart: 0 over no time, and from zero when the counter went down.
func Rate(before, after uint64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	delta := after
	if after >= before {
		delta = after - before
	}
	return float64(delta) / elapsed.Seconds()
}

// evict drops the points at or before now - Window, and the series left empty.
func (h *History) evict(now time.Time) {
	cutoff := now.Add(-Window)
	for key, r := range h.computes {
		r.DropOldest(func(p api.ComputeSample) bool { return !p.Time.After(cutoff) })
		if r.Len() == 0 {
			delete(h.computes, key)
		}
	}
	for key, ds := range h.deployments {
		ds.points.DropOldest(func(p api.DeploymentSample) bool { return !p.Time.After(cutoff) })
		if ds.points.Len() == 0 {
			delete(h.deployments, key)
		}
	}
}

// Workspace returns the series of one workspace's computes and deployments, by name, with
// the points of the last Window before now (sampling may have stalled since the last).
func (h *History) Workspace(workspace string, now time.Time) *api.History {
	cutoff := now.Add(-Window)
	h.mu.Lock()
	defer h.mu.Unlock()
	out := &api.History{
		Since: h.since, IntervalSeconds: int64(Interval / time.Second), WindowSeconds: int64(Window / time.Second),
		Computes: []api.ComputeHistory{}, Deployments: []api.DeploymentHistory{},
	}
	for key, r := range h.computes {
		name, ok := strings.CutPrefix(key, workspace+"/")
		if !ok {
			continue
		}
		pts := slices.DeleteFunc(r.Values(), func(p api.ComputeSample) bool { return !p.Time.After(cutoff) })
		if len(pts) > 0 {
			out.Computes = append(out.Computes, api.ComputeHistory{Compute: name, Points: pts})
		}
	}
	for key, ds := range h.deployments {
		if key.Workspace != workspace {
			continue
		}
		pts := slices.DeleteFunc(ds.points.Values(), func(p api.DeploymentSample) bool { return !p.Time.After(cutoff) })
		if len(pts) > 0 {
			out.Deployments = append(out.Deployments, api.DeploymentHistory{Endpoint: key.Endpoint, Deployment: key.Deployment, Points: pts})
		}
	}
	slices.SortFunc(out.Computes, func(a, b api.ComputeHistory) int { return cmp.Compare(a.Compute, b.Compute) })
	slices.SortFunc(out.Deployments, func(a, b api.DeploymentHistory) int {
		return cmp.Or(cmp.Compare(a.Endpoint, b.Endpoint), cmp.Compare(a.Deployment, b.Deployment))
	})
	return out
}

// Run samples at once and then every Interval of clk until ctx ends. A read that fails is
// logged and that sample skipped.
func (h *History) Run(ctx context.Context, clk clock.WithTicker, read func(context.Context) (Snapshot, error), log hclog.Logger) {
	t := clk.NewTicker(Interval)
	defer t.Stop()
	for {
		now := clk.Now()
		if s, err := read(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("sampling the status page's history failed", "error", err)
		} else {
			h.Record(now, s)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}
