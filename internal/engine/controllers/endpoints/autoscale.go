package endpoints

import (
	"sync/atomic"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/autoscale"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
)

// Endpoint autoscaling (scale_settings.type = "target_utilization", DESIGN 4): every
// polling_interval a timer of the work loop marks the endpoint, and its pass samples the
// router's own counts of each autoscaled deployment (requests in flight, held requests, and
// the requests that arrived since the last sample; the instances are never polled), gives
// them to the pure rule (rules/rollout, which steps rules/autoscale) and commits the count
// it decides as the deployment's Desired, with the decision, before the instances are added
// or drained. A request the router holds (no instance with room) kicks the endpoint, so
// from zero the first request is decided at once, not at the next tick.
//
// The rule's history lives in memory: after an engine restart it starts afresh, and the rule
// then waits a whole scale_down_delay before any step down.

// scaler is the autoscaler's memory of one deployment.
type scaler struct {
	hist autoscale.History
	// next is when the next regular sample is due.
	next time.Time
	// requests is the router's request counter at the last sample.
	requests uint64
	// kicked is set by the router when it holds a request; the next pass samples at once.
	kicked atomic.Bool
}

// coldStart is the node and process phases of an instance's start, kept until its readiness.
type coldStart struct{ node, process time.Duration }

// Metrics receives what the autoscaler measures; a nil Metrics records nothing.
type Metrics interface {
	// ScaleDecision records a decision that changed a deployment's count.
	ScaleDecision(endpoint, deployment string, from, to int64)
	// HoldTime records how long a held request waited and whether it got an instance.
	HoldTime(endpoint, deployment string, wait time.Duration, served bool)
	// ColdStart records an instance's start, split into its node, its process and its
	// readiness (first passed probe).
	ColdStart(endpoint, deployment string, node, process, readiness time.Duration)
}

func scalerKey(endpointKey, deployment string) string { return endpointKey + "\x00" + deployment }

// scalerFor returns the deployment's scaler, made on first use. Callers are in turn.
func (c *Controller) scalerFor(endpointKey, deployment string) *scaler {
	k := scalerKey(endpointKey, deployment)
	s := c.scalers[k]
	if s == nil {
		s = &scaler{}
		c.scalers[k] = s
	}
	return s
}

// ruleSettings are a deployment's scale settings as the rule takes them.
func ruleSettings(d model.Deployment) autoscale.Settings {
	spec, sc, t := d.Spec, d.Spec.ScaleSettings, d.Times().Scale
	maxConc := int64(api.DefaultMaxConcurrentRequestsPerInstance)
	if spec.RequestSettings != nil && spec.RequestSettings.MaxConcurrentRequestsPerInstance > 0 {
		maxConc = spec.RequestSettings.MaxConcurrentRequestsPerInstance
	}
	return autoscale.Settings{
		Min: sc.MinInstances, Max: sc.MaxInstances, TargetUtilizationPercentage: sc.TargetUtilizationPercentage,
		MaxConcurrentRequestsPerInstance: maxConc,
		PollingInterval:                  t.PollingInterval, ScaleDownDelay: t.ScaleDownDelay, ScaleToZeroDelay: t.ScaleToZeroDelay,
	}
}

// holdHooks gives a deployment's Hold (routertable.Hold) its callbacks: a held request of
// an autoscaled deployment kicks its autoscaler at once (so one at zero instances starts
// one), and each hold's wait goes to the metrics. Callers are in turn.
func (c *Controller) holdHooks(key, dn string, d model.Deployment, h *router.Hold) {
	if d.Spec.ScaleSettings.Autoscaled() {
		s := c.scalerFor(key, dn)
		h.Kick = func() {
			if !s.kicked.Swap(true) {
				c.kick(key)
			}
		}
	}
	if m := c.metrics; m != nil {
		h.ObserveHold = func(wait time.Duration, served bool) { m.HoldTime(key, dn, wait, served) }
	}
}

// SetMetrics gives the autoscaler's measures to m. Call it before Start.
func (c *Controller) SetMetrics(m Metrics) {
	c.inTurn(func() { c.metrics = m })
}

func scaleTimer(endpointKey, deployment string) runtime.Timer {
	return runtime.Timer{Kind: runtime.EndpointStep, Object: runtime.EndpointKey(endpointKey), Sub: "scale/" + deployment}
}
