package rollout

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/autoscale"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/backoff"
)

// FailedStartsBeforeError is how many failed starts in a row mark a deployment failed.
const FailedStartsBeforeError = 3

// RestartBackoffBase is the wait before a failed instance starts again, doubled for each
// failed start in a row (rules/backoff).
const RestartBackoffBase = time.Second

// DrainGrace is added to the request timeout before a draining instance is terminated.
const DrainGrace = time.Second

// Input is what one decision reads besides the time.
type Input struct {
	Endpoint model.Endpoint
	// Scale holds the autoscaled deployments' autoscaler memory and router samples, by
	// deployment; a deployment missing here starts with an empty memory.
	Scale map[string]Scale
	// InFlight is the router's count of requests in flight on each draining instance it
	// knows, by instance ID.
	InFlight map[string]int64
}

// Scale is one autoscaled deployment's autoscaler memory and the router's sample of it.
type Scale struct {
	Settings autoscale.Settings
	History  autoscale.History
	// Next is when the next polling sample is due; Requests the router's request counter
	// at the last one.
	Next     time.Time
	Requests uint64
	// Kicked: the router held a request since the last pass.
	Kicked bool
	// InFlight (held requests included, mirror copies left out) and Requests (the router's
	// counter) as the router counts them now.
	Sample Sample
}

// Sample is the router's counts of one deployment.
type Sample struct {
	InFlight int64
	Requests uint64
}

// Decision is one pass's outcome: the record to commit and what to do once it is.
type Decision struct {
	Endpoint model.Endpoint
	// Add are the new instances, in the order they join the record; the controller gives
	// each its ID and port.
	Add []model.EndpointInstance
	// Drained are the instances that began draining: their probes stop.
	Drained []string
	// Steps are the instances' next deadlines (drain end, restart), by instance ID.
	Steps map[string]time.Time
	// Scale is the autoscaled deployments' memory after the pass (its timer at Next), and
	// Scaled the decisions that changed a count.
	Scale  map[string]Scale
	Scaled []Scaled
	// Provisioned is set when the endpoint became provisioned in this pass.
	Provisioned bool
}

// Scaled is an autoscaler decision that changed a deployment's count.
type Scaled struct {
	Deployment string
	Decision   autoscale.Decision
	Kicked     bool
}

// Decide applies the rules to a live endpoint (not being deleted).
func Decide(in Input, now time.Time) Decision {
	rec := clone(in.Endpoint)
	d := Decision{Steps: map[string]time.Time{}}
	d.Scale, d.Scaled = scale(&rec, in.Scale, now)
	allReady := true
	for _, name := range slices.Sorted(maps.Keys(rec.Deployments)) {
		dep := rec.Deployments[name]
		target := dep.Target()
		var cur []int
		for i, x := range rec.Instances {
			if x.Deployment == name && x.Generation == dep.Generation && x.State != api.EndpointInstanceDraining && !x.Terminating {
				cur = append(cur, i)
			}
		}
		for n := int64(len(cur)); n < target; n++ {
			d.Add = append(d.Add, model.EndpointInstance{
				Deployment: name, Generation: dep.Generation, Task: "serve-0",
				State: api.EndpointInstanceStarting, Process: model.ProcessOf(dep),
			})
		}
		if extra := int64(len(cur)) - target; extra > 0 {
			// Drain the instances that are not ready first, then the newest.
			slices.SortStableFunc(cur, func(a, b int) int {
				ra, rb := rec.Instances[a].State == api.EndpointInstanceReady, rec.Instances[b].State == api.EndpointInstanceReady
				switch {
				case ra == rb:
					return 0
				case ra:
					return -1
				}
				return 1
			})
			for _, i := range cur[len(cur)-int(extra):] {
				d.drain(&rec, i, now)
			}
			cur = cur[:len(cur)-int(extra)]
		}
		var ready int64
		for _, i := range cur {
			if rec.Instances[i].State == api.EndpointInstanceReady {
				ready++
			}
		}
		if ready < target {
			allReady = false
			continue
		}
		// The new generation is ready: the old one stops taking traffic now.
		for i, x := range rec.Instances {
			if x.Deployment == name && x.Generation != dep.Generation && x.State != api.EndpointInstanceDraining && !x.Terminating {
				d.drain(&rec, i, now)
			}
		}
	}
	MoveTraffic(&rec)
	for i, x := range rec.Instances {
		if _, ok := rec.Deployment(x.Deployment); !ok && x.State != api.EndpointInstanceDraining && !x.Terminating {
			d.drain(&rec, i, now)
		}
	}
	for i := range rec.Instances {
		x := &rec.Instances[i]
		switch {
		case x.Terminating:
		case x.State == api.EndpointInstanceDraining:
			if !now.Before(x.DrainUntil) || drained(rec, *x, in.InFlight, now) {
				x.Terminating = true
			} else {
				d.Steps[x.ID] = x.DrainUntil
			}
		case x.State == api.EndpointInstanceFailed && !x.RestartAt.IsZero():
			if !now.Before(x.RestartAt) {
				x.Restarts++
				x.Task = "serve-" + strconv.FormatInt(x.Restarts, 10)
				x.State, x.StartedAt, x.RestartAt, x.EverReady = api.EndpointInstanceStarting, time.Time{}, time.Time{}, false
			} else {
				d.Steps[x.ID] = x.RestartAt
			}
		}
	}
	if allReady && !rec.Provisioned {
		rec.Provisioned, d.Provisioned = true, true
	}
	d.Endpoint = rec
	return d
}

// clone copies what Decide changes, so the caller's record is left as it was.
func clone(r model.Endpoint) model.Endpoint {
	r.Deployments = maps.Clone(r.Deployments)
	r.Retiring = maps.Clone(r.Retiring)
	r.Instances = slices.Clone(r.Instances)
	return r
}

// RequestTimeout is a deployment's request timeout.
func RequestTimeout(d model.Deployment) time.Duration {
	if rs := d.Spec.RequestSettings; rs != nil {
		return time.Duration(rs.RequestTimeoutMS) * time.Millisecond
	}
	return time.Duration(api.DefaultRequestTimeoutMS) * time.Millisecond
}

// drain takes an instance out of the router; it is terminated once its requests have had
// the deployment's request timeout to finish, at once when it was not ready.
func (d *Decision) drain(rec *model.Endpoint, i int, now time.Time) {
	x := &rec.Instances[i]
	timeout := time.Duration(api.DefaultRequestTimeoutMS) * time.Millisecond
	if dep, ok := rec.Deployment(x.Deployment); ok {
		timeout = RequestTimeout(dep)
	}
	if x.State != api.EndpointInstanceReady {
		timeout, x.Terminating = 0, true
	}
	x.State, x.DrainUntil = api.EndpointInstanceDraining, now.Add(timeout+DrainGrace)
	d.Drained = append(d.Drained, x.ID)
}

// drained reports whether a draining instance of an autoscaled deployment has finished its
// requests: the router counts none in flight on it, and DrainGrace has passed since the
// drain began, so a request that took its slot from the table of just before the drain has
// long been counted. A deployment of a fixed count waits out the timeout.
func drained(rec model.Endpoint, x model.EndpointInstance, inFlight map[string]int64, now time.Time) bool {
	dep, ok := rec.Deployment(x.Deployment)
	if !ok || !dep.Spec.ScaleSettings.Autoscaled() || dep.Spec.RequestSettings == nil {
		return false
	}
	began := x.DrainUntil.Add(-RequestTimeout(dep) - DrainGrace)
	if now.Before(began.Add(DrainGrace)) {
		return false
	}
	n, known := inFlight[x.ID]
	return known && n == 0
}

// scale runs the autoscaler of each autoscaled deployment that is due or kicked and sets
// Desired from its decision; it returns every autoscaled deployment's memory after the pass.
func scale(rec *model.Endpoint, in map[string]Scale, now time.Time) (map[string]Scale, []Scaled) {
	out := map[string]Scale{}
	var scaled []Scaled
	for _, dn := range slices.Sorted(maps.Keys(rec.Deployments)) {
		dep := rec.Deployments[dn]
		if !dep.Spec.ScaleSettings.Autoscaled() {
			continue
		}
		s := in[dn]
		due := !now.Before(s.Next)
		if !s.Kicked && !due {
			s.Kicked = false
			out[dn] = s
			continue
		}
		sample := autoscale.Sample{At: now, InFlight: s.Sample.InFlight, Kick: !due}
		if due { // a kick out of turn leaves the arrivals to the next polling sample
			if s.Sample.Requests >= s.Requests {
				sample.Arrived = int64(s.Sample.Requests - s.Requests)
			}
			s.Requests = s.Sample.Requests
		}
		var dec autoscale.Decision
		s.History, dec = autoscale.Step(s.Settings, s.History, dep.Desired, sample)
		if dec.Changed() {
			dep.Desired = dec.Desired
			if dec.From == 0 {
				dep.StartError = "" // a new attempt
			}
			dep.Decisions = append(dep.Decisions, api.ScaleDecision{
				Time: now, From: dec.From, To: dec.Desired, Reason: dec.Reason,
				Load: dec.Inputs.Load, AverageLoad: dec.Inputs.AverageLoad, PeakNeed: dec.Inputs.PeakNeed,
			})
			if n := len(dep.Decisions); n > api.MaxScaleDecisions {
				dep.Decisions = append([]api.ScaleDecision(nil), dep.Decisions[n-api.MaxScaleDecisions:]...)
			}
			rec.Deployments[dn] = dep
			scaled = append(scaled, Scaled{Deployment: dn, Decision: dec, Kicked: s.Kicked})
		}
		if due {
			s.Next = now.Add(s.Settings.Normalize().PollingInterval)
		}
		s.Kicked = false
		out[dn] = s
	}
	return out, scaled
}

// Fail marks an instance failed: a start that failed before the instance was ready once
// counts, the restart waits the back-off, FailedStartsBeforeError failed starts in a row
// set the deployment's Error, and an autoscaled deployment's held requests get why
// (StartError). It returns the wait before the restart.
func Fail(rec *model.Endpoint, x *model.EndpointInstance, why string, now time.Time) time.Duration {
	if !x.EverReady {
		x.Failures++
	}
	// The first restart waits the base (DESIGN's 1 s), each failed start in a row before
	// it doubles the wait.
	wait := backoff.After(max(x.Failures-1, 0), RestartBackoffBase)
	x.State, x.RestartAt = api.EndpointInstanceFailed, now.Add(wait)
	dep, ok := rec.Deployments[x.Deployment]
	if !ok {
		return wait
	}
	if x.Failures >= FailedStartsBeforeError {
		dep.Error = fmt.Sprintf("instance %s failed %d times in a row before becoming ready; last: %s", x.ID, x.Failures, why)
	}
	if !x.EverReady && dep.Spec.ScaleSettings.Autoscaled() {
		dep.StartError = fmt.Sprintf("instance %s: %s", x.ID, why)
	}
	rec.Deployments[x.Deployment] = dep
	return wait
}

// Ready marks an instance ready: its failed starts are forgotten, and its deployment's
// errors cleared.
func Ready(rec *model.Endpoint, x *model.EndpointInstance) {
	x.State, x.EverReady, x.Failures = api.EndpointInstanceReady, true, 0
	if dep, declared := rec.Deployments[x.Deployment]; declared && (dep.Error != "" || dep.StartError != "") {
		dep.Error, dep.StartError = "", ""
		rec.Deployments[x.Deployment] = dep
	}
}

// RolledOut reports whether a deployment has its target of ready instances of its current
// generation.
func RolledOut(r model.Endpoint, name string) bool {
	d, ok := r.Deployments[name]
	if !ok {
		return false
	}
	var ready int64
	for _, x := range r.Instances {
		if x.Deployment == name && x.Generation == d.Generation && x.State == api.EndpointInstanceReady && !x.Terminating {
			ready++
		}
	}
	return ready >= d.Target()
}

// TrafficRolledOut reports whether every deployment the declared split sends requests to
// has rolled out.
func TrafficRolledOut(r model.Endpoint) bool {
	for name, percent := range r.Traffic {
		if percent > 0 && !RolledOut(r, name) {
			return false
		}
	}
	return true
}

// MoveTraffic makes the declared split live once every deployment it sends requests to
// has rolled out, and lets go of the retiring deployments the live split no longer uses.
func MoveTraffic(r *model.Endpoint) {
	if !maps.Equal(r.LiveTraffic, r.Traffic) && TrafficRolledOut(*r) {
		r.LiveTraffic = maps.Clone(r.Traffic)
	}
	for name := range r.Retiring {
		if r.LiveTraffic[name] == 0 {
			delete(r.Retiring, name)
		}
	}
}

// Settled reports whether every deployment has its target of ready instances of its
// current generation, no older instance still takes traffic, and the declared split is the
// live one.
func Settled(r model.Endpoint) bool {
	if len(r.Retiring) > 0 || !maps.Equal(r.LiveTraffic, r.Traffic) {
		return false
	}
	for name, d := range r.Deployments {
		var ready int64
		for _, x := range r.Instances {
			if x.Deployment != name || x.Terminating || x.State == api.EndpointInstanceDraining {
				continue
			}
			if x.Generation != d.Generation {
				return false
			}
			if x.State == api.EndpointInstanceReady {
				ready++
			}
		}
		if ready < d.Target() {
			return false
		}
	}
	return true
}
