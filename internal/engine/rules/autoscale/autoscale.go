package autoscale

import (
	"slices"
	"time"
)

// UpWindow is the short window scale-up averages over, in samples (polling intervals).
const UpWindow = 6

// UpSustain is how many samples in a row the short window's average must need more than the
// count before it goes up without two confirming samples (rule 4).
const UpSustain = 3

// UpTolerancePercent is the hysteresis band on the way up: the count goes up only when the
// short window's load is more than this many percent above what the count serves at the
// target, so a constant load with ±10% noise, whose average the count already serves,
// never moves it.
const UpTolerancePercent = 10

// DownTolerancePercent is the hysteresis band on the way down: the count goes down only when
// the peak need is more than this many percent below it, so a constant load with ±10% noise,
// whose peaks the count already covers, never moves it.
const DownTolerancePercent = 10

// Defaults of scale_settings (DESIGN 3); ScaleToZeroDelay defaults to ScaleDownDelay.
const (
	DefaultTargetUtilizationPercentage = 70
	DefaultPollingInterval             = time.Second
	DefaultScaleDownDelay              = 5 * time.Minute
)

// Reasons a decision gives. A decision that keeps the count says ReasonSteady.
const (
	ReasonBelowMin = "below min_instances"
	ReasonAboveMax = "above max_instances"
	ReasonFromZero = "request while at zero instances"
	ReasonUp       = "load above target utilization"
	ReasonDown     = "load below target utilization for scale_down_delay"
	ReasonToZero   = "no request for scale_to_zero_delay"
	ReasonSteady   = "steady"
)

// Settings are one deployment's scale_settings and the request setting they divide by.
// Zero values mean the defaults (Normalize); validation refuses bad values before they are
// stored, and anything out of range here is clamped rather than refused.
type Settings struct {
	Min, Max                         int64
	TargetUtilizationPercentage      int64
	MaxConcurrentRequestsPerInstance int64
	PollingInterval                  time.Duration
	ScaleDownDelay                   time.Duration
	// ScaleToZeroDelay is scale_to_zero_delay; zero means ScaleDownDelay.
	ScaleToZeroDelay time.Duration
}

// Normalize fills defaults and clamps: 0 <= Min <= Max, percent 1..100, at least one
// concurrent request per instance, positive interval and delays.
func (s Settings) Normalize() Settings {
	s.Max = max(s.Max, 0)
	s.Min = min(max(s.Min, 0), s.Max)
	if s.TargetUtilizationPercentage <= 0 {
		s.TargetUtilizationPercentage = DefaultTargetUtilizationPercentage
	}
	s.TargetUtilizationPercentage = min(s.TargetUtilizationPercentage, 100)
	s.MaxConcurrentRequestsPerInstance = max(s.MaxConcurrentRequestsPerInstance, 1)
	if s.PollingInterval <= 0 {
		s.PollingInterval = DefaultPollingInterval
	}
	if s.ScaleDownDelay <= 0 {
		s.ScaleDownDelay = DefaultScaleDownDelay
	}
	if s.ScaleToZeroDelay <= 0 {
		s.ScaleToZeroDelay = s.ScaleDownDelay
	}
	return s
}

// Need is the number of instances a load (requests in flight) needs at the target
// utilization, unclamped: ceil(load × 100 / (max_concurrent × percent)). sum/n is an average
// load (n >= 1), kept as a fraction so no rounding happens before the ceiling.
func (s Settings) need(sum, n int64) int64 {
	s = s.Normalize()
	if sum <= 0 || n <= 0 {
		return 0
	}
	// Loads are requests the router holds (bounded); cap them so the product cannot overflow.
	sum = min(sum, 1<<40)
	d := n * s.MaxConcurrentRequestsPerInstance * s.TargetUtilizationPercentage
	return (sum*100 + d - 1) / d
}

// Need is the instances a load needs (rule 1), before clamping to the bounds.
func (s Settings) Need(load int64) int64 { return s.need(load, 1) }

// Sample is one reading of the router's counts for a deployment.
type Sample struct {
	At time.Time
	// InFlight is the requests in flight (held ones included) at At.
	InFlight int64
	// Arrived counts requests that arrived since the previous sample, so a request that came
	// and went between two samples still counts as activity for scale-to-zero.
	Arrived int64
	// Kick marks a reading out of turn, taken because the router held a request: it can
	// decide from zero (rule 3) and marks the request as activity, but it is not one of the
	// polling samples the windows are made of.
	Kick bool
}

// History is what the rule remembers of a deployment's samples. It is a value: Step returns
// the next one and never changes the one it is given. Its size is bounded by UpWindow and by
// max_instances, whatever the delays.
type History struct {
	// samples are the latest samples, oldest first, at most UpWindow.
	samples []Sample
	// neededAt[k-1] is the time of the latest sample whose need was k or more (non-increasing
	// in k); its length is at most max_instances.
	neededAt []time.Time
	// since is the first sample: the history covers [since, last sample].
	since time.Time
	// lastRequest is the latest sample that saw a request in flight or arrived.
	lastRequest time.Time
	// lastDown is when the count last went down; the up window never reaches before it.
	lastDown time.Time
	// above counts the samples in a row whose window average needed more than the count.
	above int
}

// LastRequest is the latest time a request was seen, zero if none was.
func (h History) LastRequest() time.Time { return h.lastRequest }

// Len is the number of samples the short window holds.
func (h History) Len() int { return len(h.samples) }

// observe returns h with the sample added.
func (h History) observe(s Settings, x Sample) History {
	out := History{since: h.since, lastRequest: h.lastRequest, lastDown: h.lastDown, above: h.above}
	if out.since.IsZero() {
		out.since = x.At
	}
	if x.InFlight > 0 || x.Arrived > 0 {
		out.lastRequest = x.At
	}
	if x.Kick {
		out.samples, out.neededAt = h.samples, h.neededAt
		return out
	}
	keep := h.samples
	if len(keep) >= UpWindow {
		keep = keep[len(keep)-UpWindow+1:]
	}
	out.samples = append(slices.Clone(keep), x)
	// The need of this sample, bounded by Max: counts above Max are never wanted.
	n := min(s.Need(max(x.InFlight, 0)), s.Max)
	out.neededAt = slices.Clone(h.neededAt)
	if int64(len(out.neededAt)) > s.Max {
		out.neededAt = out.neededAt[:s.Max]
	}
	for int64(len(out.neededAt)) < n {
		out.neededAt = append(out.neededAt, time.Time{})
	}
	for k := range n {
		out.neededAt[k] = x.At
	}
	return out
}

// Inputs are what a decision was made from, recorded with it.
type Inputs struct {
	// Load is the sample's requests in flight.
	Load int64 `json:"load"`
	// AverageLoad is the short window's average load (rule 4).
	AverageLoad float64 `json:"average_load"`
	// UpNeed is the need of AverageLoad.
	UpNeed int64 `json:"up_need"`
	// upOver reports whether the window's average, and with two samples the lower of the
	// last two, are more than UpTolerancePercent above what the count serves.
	upOver, recentOver bool
	// RecentNeed is the need of the lower of the last two samples (rule 4's confirmation).
	RecentNeed int64 `json:"recent_need"`
	// PeakNeed is the highest need sampled over the last scale_down_delay (rule 5).
	PeakNeed int64 `json:"peak_need"`
	// Idle is how long no request has been seen (rule 6).
	Idle time.Duration `json:"idle"`
}

// Decision is what the rule says at one sample.
type Decision struct {
	At      time.Time
	From    int64
	Desired int64
	Reason  string
	Inputs  Inputs
}

// Changed reports whether the decision changes the count.
func (d Decision) Changed() bool { return d.Desired != d.From }

// Step adds a sample to the history and decides the count at x.At for a deployment that has
// current instances (those starting included: they are on their way). It returns the next
// history and the decision. The package documentation states the rules.
func Step(set Settings, h History, current int64, x Sample) (History, Decision) {
	s := set.Normalize()
	now := x.At
	h = h.observe(s, x)
	current = max(current, 0)
	d := Decision{At: now, From: current, Desired: current, Reason: ReasonSteady}

	// Rule 4's window: the latest UpWindow samples within UpWindow intervals, none before
	// the last scale-down.
	var sum, n int64
	var recent []int64 // the window's loads, oldest first
	horizon := now.Add(-UpWindow * s.PollingInterval)
	for _, y := range h.samples {
		if y.At.After(horizon) && !y.At.Before(h.lastDown) {
			sum += max(y.InFlight, 0)
			n++
			recent = append(recent, max(y.InFlight, 0))
		}
	}
	if k := len(recent); k >= 2 {
		low := min(recent[k-1], recent[k-2])
		d.Inputs.RecentNeed = s.Need(low)
		d.Inputs.recentOver = s.need(low*100, 100+UpTolerancePercent) > current
	}
	d.Inputs.Load = max(x.InFlight, 0)
	if n > 0 {
		d.Inputs.AverageLoad = float64(sum) / float64(n)
	}
	d.Inputs.UpNeed = s.need(sum, n)
	d.Inputs.upOver = s.need(sum*100, n*(100+UpTolerancePercent)) > current
	d.Inputs.PeakNeed = h.peakNeed(now.Add(-s.ScaleDownDelay))
	idleSince := h.since
	if h.lastRequest.After(idleSince) {
		idleSince = h.lastRequest
	}
	d.Inputs.Idle = now.Sub(idleSince)
	if x.InFlight > 0 || x.Arrived > 0 {
		d.Inputs.Idle = 0
	}

	switch {
	case current < s.Min:
		d.Desired, d.Reason = s.Min, ReasonBelowMin
	case current > s.Max:
		d.Desired, d.Reason = s.Max, ReasonAboveMax
	case current == 0:
		if x.InFlight > 0 || x.Arrived > 0 {
			d.Desired, d.Reason = min(max(s.Need(x.InFlight), 1), s.Max), ReasonFromZero
		}
	case x.Kick:
		// Out of turn: only rule 3 decides; the next polling sample does the rest.
		return h, d
	case current < s.Max && d.Inputs.upOver && (d.Inputs.recentOver || h.above+1 >= UpSustain):
		d.Desired, d.Reason = min(max(d.Inputs.UpNeed, d.Inputs.RecentNeed), s.Max), ReasonUp
	case s.Min == 0 && d.Inputs.Idle >= s.ScaleToZeroDelay:
		d.Desired, d.Reason = 0, ReasonToZero
	case now.Sub(h.since) >= s.ScaleDownDelay && d.Inputs.PeakNeed*100 < current*(100-DownTolerancePercent):
		if to := max(d.Inputs.PeakNeed, s.Min, 1); to < current {
			d.Desired, d.Reason = to, ReasonDown
		}
	}
	if d.Desired < d.From {
		h.lastDown = now
	}
	switch {
	case d.Desired != d.From || !d.Inputs.upOver:
		h.above = 0
	default:
		h.above++
	}
	return h, d
}

// peakNeed is the highest need sampled after the horizon (the window is open at its old end:
// a sample exactly scale_down_delay old has left it).
func (h History) peakNeed(horizon time.Time) int64 {
	for k := len(h.neededAt); k > 0; k-- {
		if h.neededAt[k-1].After(horizon) {
			return int64(k)
		}
	}
	return 0
}
