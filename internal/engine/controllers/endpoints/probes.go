package endpoints

import (
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/serving"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/rollout"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Probes of endpoint instances: each is a deadline in the timer queue; when it fires the
// probe (serving.HTTPProbe, or a test's) runs on its own goroutine and its result is applied
// in the writers' turn (see the rules in runtime.go and rules/rollout).

// SetProber replaces the HTTP probe; tests of the rules use it with a fake driver, whose
// nodes serve nothing.
func (c *Controller) SetProber(p serving.Prober) { c.probe.Store(&p) }

// RunProbe starts one probe of an instance's current process.
func (c *Controller) RunProbe(id, kind string) {
	c.inTurn(func() { c.runProbe(id, kind) })
}

// runProbe is RunProbe in turn; the probe itself runs outside it.
func (c *Controller) runProbe(id, kind string) {
	key, ok := c.nodes[id]
	st := c.probes[id]
	if !ok || st == nil {
		return
	}
	var in model.EndpointInstance
	var probe api.Probe
	var times validation.ProbeTimes
	err := c.store.View(func(tx *store.Tx) error {
		rec, err := model.GetEndpoint(tx, model.WorkspaceOf(key), model.NameOf(key))
		if err != nil {
			return err
		}
		for _, x := range rec.Instances {
			if x.ID == id {
				in = x
			}
		}
		if d, ok := rec.Deployment(in.Deployment); ok && in.ID != "" {
			probe, times = probeOf(d, kind)
		}
		return nil
	})
	if err != nil || in.ID == "" || probe.Path == "" || in.Task != st.task || in.Terminating ||
		(in.State != api.EndpointInstanceStarting && in.State != api.EndpointInstanceReady) {
		return
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(in.Host, strconv.Itoa(in.Port)), Path: probe.Path}
	timeout := times.Timeout
	// The period counts from this probe's start, so a slow probe does not slow the next.
	started := c.clock.Now().UTC()
	c.loop.Go(func() {
		passed := (*c.probe.Load())(c.ctx, u.String(), timeout)
		c.probeResult(key, id, in.Task, kind, started, passed)
	})
}

// holding reports whether the router holds requests for the deployment.
func (c *Controller) holding(endpoint, deployment string) bool {
	return c.scoring.Stats(endpoint)[deployment].Held > 0
}

// probeResult applies one probe result and schedules the next probe.
func (c *Controller) probeResult(key, id, task, kind string, started time.Time, passed bool) {
	if c.ctx.Err() != nil {
		return
	}
	c.inTurn(func() { c.applyProbe(key, id, task, kind, started, passed) })
}

// applyProbe is probeResult in turn.
func (c *Controller) applyProbe(key, id, task, kind string, started time.Time, passed bool) {
	st := c.probes[id]
	if st == nil || st.task != task {
		return
	}
	now := c.clock.Now().UTC()
	var changed bool
	_ = c.updateEndpointInstance(key, id, func(rec *model.Endpoint, in *model.EndpointInstance) {
		if in.Task != task || in.Terminating || (in.State != api.EndpointInstanceStarting && in.State != api.EndpointInstanceReady) {
			return
		}
		d, found := rec.Deployment(in.Deployment)
		if !found {
			return // removed: its instances drain
		}
		probe, times := probeOf(d, kind)
		r := rollout.Probe(rec, in, st.Counts, rollout.ProbeInput{
			Live: kind == probeLive, Passed: passed, Probe: probe, InitialDelay: times.InitialDelay, Period: times.Period,
			Started: started, Holding: kind == probeReady && !in.EverReady && c.holding(rec.Name, in.Deployment),
		}, now)
		st.Counts, changed = r.Counts, r.Failed != "" || r.Ready || r.NotReady
		switch {
		case r.Failed != "":
			c.instanceFailed(rec, in, r.Failed, now)
			return
		case r.Ready:
			readiness := now.Sub(in.StartedAt)
			cs, measured := c.coldStarts[in.ID]
			delete(c.coldStarts, in.ID)
			c.log.Info("endpoint instance ready", "endpoint", key, "instance", in.ID, "deployment", in.Deployment,
				"node_start", cs.node, "process_start", cs.process, "readiness", readiness)
			if m := c.metrics; m != nil && measured {
				m.ColdStart(key, in.Deployment, cs.node, cs.process, readiness)
			}
		case r.NotReady:
			c.log.Warn("endpoint instance not ready", "endpoint", key, "instance", in.ID, "failures", st.ReadyFail)
		}
		c.loop.SetTimer(ProbeTimer(id, kind), r.Next)
	})
	if changed {
		c.kick(key)
	}
}

// probeOf is one of a deployment's probes, with its durations.
func probeOf(d model.Deployment, kind string) (api.Probe, validation.ProbeTimes) {
	if kind == probeLive {
		return *d.Spec.LivenessProbe, d.Times().Liveness
	}
	return *d.Spec.ReadinessProbe, d.Times().Readiness
}
