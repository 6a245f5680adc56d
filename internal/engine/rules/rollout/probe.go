package rollout

import (
	"fmt"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

// HeldReadyProbe is how often a starting instance's readiness is probed while the router
// holds requests for its deployment (from zero, every request waits for it): a cold start
// is then served within this of the instance's readiness, not a whole probe period later.
// Failures of these extra probes count toward failure_threshold only once the probe's own
// budget (initial_delay + period × failure_threshold) has passed.
const HeldReadyProbe = 20 * time.Millisecond

// Counts are the results in a row of one process's probes.
type Counts struct{ ReadyOK, ReadyFail, LiveFail int64 }

// ProbeInput is one probe's result with the probe's settings.
type ProbeInput struct {
	Live, Passed bool
	Probe        api.Probe
	// InitialDelay and Period are the probe's, parsed.
	InitialDelay, Period time.Duration
	// Started is when this probe began; the next one is a period after it.
	Started time.Time
	// Holding: the router holds requests for the instance's deployment.
	Holding bool
}

// ProbeResult is what one probe result does.
type ProbeResult struct {
	Counts Counts
	// Failed, when set, is why the instance failed: the caller fails it (Fail) and probes
	// it no more.
	Failed string
	// Ready: it became ready (Ready was applied). NotReady: a ready instance stopped taking
	// traffic. Either changes the record.
	Ready, NotReady bool
	// Next is when to probe again, unless Failed.
	Next time.Time
}

// Probe applies one probe result to a starting or ready instance: success_threshold
// readiness passes in a row make it ready, failure_threshold failures in a row make a ready
// one not ready, and fail one that never was once the probe's budget (initial_delay +
// period × failure_threshold) has passed since its start; failure_threshold liveness
// failures in a row fail it.
func Probe(rec *model.Endpoint, x *model.EndpointInstance, c Counts, in ProbeInput, now time.Time) ProbeResult {
	p := in.Probe
	r := ProbeResult{Counts: c}
	switch {
	case in.Live && in.Passed:
		r.Counts.LiveFail = 0
	case in.Live:
		if r.Counts.LiveFail++; r.Counts.LiveFail >= p.FailureThreshold {
			r.Failed = fmt.Sprintf("liveness probe GET %s failed %d times in a row", p.Path, r.Counts.LiveFail)
			return r
		}
	case in.Passed:
		r.Counts.ReadyOK, r.Counts.ReadyFail = r.Counts.ReadyOK+1, 0
		if r.Counts.ReadyOK >= p.SuccessThreshold && x.State != api.EndpointInstanceReady {
			Ready(rec, x)
			r.Ready = true
		}
	default:
		r.Counts.ReadyOK, r.Counts.ReadyFail = 0, r.Counts.ReadyFail+1
		budget := in.InitialDelay + in.Period*time.Duration(p.FailureThreshold)
		if r.Counts.ReadyFail >= p.FailureThreshold && (x.EverReady || now.Sub(x.StartedAt) >= budget) {
			if !x.EverReady {
				r.Failed = fmt.Sprintf("readiness probe GET %s did not pass within %s (initial_delay + period * failure_threshold)", p.Path, budget)
				return r
			}
			if x.State == api.EndpointInstanceReady {
				x.State, r.NotReady = api.EndpointInstanceStarting, true
			}
		}
	}
	r.Next = in.Started.Add(in.Period)
	if !in.Live && x.State == api.EndpointInstanceStarting && !x.EverReady && in.Holding {
		// Requests wait for this instance: look again soon rather than a period later.
		r.Next = in.Started.Add(min(HeldReadyProbe, in.Period))
	}
	return r
}
