package autoscale

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 13, 12, 0, 0, 0, time.UTC)

// base: one request per instance at 70%: an instance takes 0.7 requests, so need(load) =
// ceil(load / 0.7).
func base() Settings {
	return Settings{
		Min: 0, Max: 10, TargetUtilizationPercentage: 70, MaxConcurrentRequestsPerInstance: 1,
		PollingInterval: time.Second, ScaleDownDelay: 10 * time.Second, ScaleToZeroDelay: 20 * time.Second,
	}
}

func TestNeed(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Settings
		load int64
		want int64
	}{
		{"no load", base(), 0, 0},
		{"one request needs one instance", base(), 1, 2}, // 1/0.7 = 1.43
		{"seven at 70% need ten", base(), 7, 10},
		{"eight at 70% need twelve", base(), 8, 12},
		{"100% of one", Settings{TargetUtilizationPercentage: 100, MaxConcurrentRequestsPerInstance: 1}, 3, 3},
		{"100% of four per instance", Settings{TargetUtilizationPercentage: 100, MaxConcurrentRequestsPerInstance: 4}, 9, 3},
		{"50% of four per instance", Settings{TargetUtilizationPercentage: 50, MaxConcurrentRequestsPerInstance: 4}, 4, 2},
		{"defaults: 70% of one", Settings{}, 7, 10},
		{"huge load does not overflow", base(), 1 << 62, (int64(1)<<40*100 + 69) / 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Need(tc.load); got != tc.want {
				t.Fatalf("Need(%d) = %d; want %d", tc.load, got, tc.want)
			}
		})
	}
}

// run plays loads, one sample per polling interval from t0, starting at count start; each
// decision is applied at once. It returns the decisions that changed the count.
type event struct {
	at       time.Duration // since t0
	from, to int64
	reason   string
}

func run(s Settings, start int64, loads []int64) ([]event, int64) {
	var h History
	cur := start
	var out []event
	for i, l := range loads {
		at := t0.Add(time.Duration(i) * s.Normalize().PollingInterval)
		var d Decision
		h, d = Step(s, h, cur, Sample{At: at, InFlight: l, Arrived: l})
		if d.Changed() {
			out = append(out, event{at.Sub(t0), d.From, d.Desired, d.Reason})
			cur = d.Desired
		}
	}
	return out, cur
}

func repeat(load int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = load
	}
	return out
}

func cat(parts ...[]int64) []int64 {
	var out []int64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestTimelines(t *testing.T) {
	sec := time.Second
	for _, tc := range []struct {
		name  string
		s     Settings
		start int64
		loads []int64
		want  []event
		final int64
	}{
		{"desired is clamped to max", base(), 1, repeat(100, 3),
			[]event{{sec, 1, 10, ReasonUp}}, 10},
		{"below min goes to min at once", func() Settings { s := base(); s.Min = 3; return s }(), 0, repeat(0, 2),
			[]event{{0, 0, 3, ReasonBelowMin}}, 3},
		{"above max goes to max at once", base(), 14, repeat(0, 1),
			[]event{{0, 14, 10, ReasonAboveMax}}, 10},
		{"from zero the first sample with a request decides", base(), 0, cat(repeat(0, 3), repeat(1, 1)),
			[]event{{3 * sec, 0, 2, ReasonFromZero}}, 2},
		{"from zero a burst starts its need at once", base(), 0, []int64{7},
			[]event{{0, 0, 10, ReasonFromZero}}, 10},
		{"a step is followed in one decision at its second sample", base(), 2, cat(repeat(0, 10), repeat(7, 7)),
			// at 11s the average (14/6) needs 4 > 2 and both last samples need 10
			[]event{{11 * sec, 2, 10, ReasonUp}}, 10},
		{"a single spike moves up by its average, once it has kept it up for 3 samples", base(), 2, cat(repeat(1, 10), []int64{6}, repeat(1, 5)),
			// window 1,1,1,1,1,6 -> avg 11/6 -> need 3 at 10s, 11s and 12s
			[]event{{12 * sec, 2, 3, ReasonUp}}, 3},
		{"a load alternating between low and high goes up on its average", base(), 2, cat(repeat(1, 6), []int64{6, 0, 6, 0, 6, 0, 6}),
			// averages from 6s: 1.67, 1.5, 2.33, 2.17, 3, 2.83 -> needs 3,3,4,4,5,5: more than 10% above
			// what 2 serve (1.4) for 3 samples at 8s; then within 10% of what 4 serve (2.8), so no
			// second step for the swing of the average
			[]event{{8 * sec, 2, 4, ReasonUp}}, 4},
		{"down only after scale_down_delay of lower need, one step to the peak", base(), 10, cat(repeat(7, 10), repeat(2, 12)),
			// last need-10 sample at 9s; peak over (t-10s, t] is 3 (need of 2) from 19s on
			[]event{{19 * sec, 10, 3, ReasonDown}}, 3},
		{"returning demand restarts the down window", base(), 10, cat(repeat(7, 5), repeat(2, 8), repeat(7, 1), repeat(2, 12)),
			// need 10 again at 13s, so down at 23s, not at 14s
			[]event{{23 * sec, 10, 3, ReasonDown}}, 3},
		{"down stops at min", func() Settings { s := base(); s.Min = 4; return s }(), 10, cat(repeat(7, 5), repeat(1, 20)),
			[]event{{14 * sec, 10, 4, ReasonDown}}, 4},
		{"need 0 keeps one instance until scale_to_zero_delay", base(), 3, cat(repeat(2, 1), repeat(0, 25)),
			// peak 3 at 0s; down to 1 at 10s; zero at 20s (20s after the last request)
			[]event{{10 * sec, 3, 1, ReasonDown}, {20 * sec, 1, 0, ReasonToZero}}, 0},
		{"to zero defaults to scale_down_delay", func() Settings { s := base(); s.ScaleToZeroDelay = 0; return s }(), 2, cat(repeat(1, 1), repeat(0, 12)),
			[]event{{10 * sec, 2, 0, ReasonToZero}}, 0},
		{"to zero may be shorter than scale_down_delay", func() Settings { s := base(); s.ScaleToZeroDelay = 3 * time.Second; return s }(), 5, cat(repeat(3, 1), repeat(0, 5)),
			[]event{{3 * sec, 5, 0, ReasonToZero}}, 0},
		{"a request in the to-zero window restarts it", base(), 2, cat(repeat(1, 1), repeat(0, 15), repeat(1, 1), repeat(0, 25)),
			// down to one 10s after the last request, to zero 20s after it
			[]event{{10 * sec, 2, 1, ReasonDown}, {36 * sec, 1, 0, ReasonToZero}}, 0},
		{"hysteresis: a peak within 10% below keeps the count", func() Settings { s := base(); s.Max = 20; return s }(), 10, repeat(6, 30),
			// need(6) = 9, 10% below 10 is not more than 10%
			nil, 10},
		{"hysteresis: more than 10% below goes down", func() Settings { s := base(); s.Max = 20; return s }(), 11, repeat(6, 30),
			[]event{{10 * sec, 11, 9, ReasonDown}}, 9},
		{"never to zero with min_instances 1", func() Settings { s := base(); s.Min = 1; return s }(), 1, repeat(0, 100), nil, 1},
		{"nothing goes down before the history covers the delay", base(), 5, repeat(0, 10),
			[]event{}, 5},
		{"zero stays zero without requests", base(), 0, repeat(0, 50), nil, 0},
		{"a down is not undone by the window it measured", func() Settings {
			s := base()
			s.ScaleDownDelay = 2 * time.Second
			s.ScaleToZeroDelay = time.Hour
			return s
		}(), 10,
			cat(repeat(7, 3), repeat(1, 10)),
			// down window 2s: peak at 4s is need 2 (sample at 3s, 4s); the up window still holds 7s but starts at the down
			[]event{{4 * sec, 10, 2, ReasonDown}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, final := run(tc.s, tc.start, tc.loads)
			if len(got) != len(tc.want) {
				t.Fatalf("events = %+v; want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("event %d = %+v; want %+v (all: %+v)", i, got[i], tc.want[i], got)
				}
			}
			if final != tc.final {
				t.Fatalf("final count %d; want %d", final, tc.final)
			}
		})
	}
}

// TestKickFromZero: the router's kick is a sample between polling ticks; it decides at its
// own time, not at the next tick.
func TestKickFromZero(t *testing.T) {
	s := base()
	var h History
	h, d := Step(s, h, 0, Sample{At: t0})
	if d.Changed() {
		t.Fatalf("idle tick decided %+v", d)
	}
	at := t0.Add(300 * time.Millisecond)
	_, d = Step(s, h, 0, Sample{At: at, InFlight: 1, Arrived: 1})
	if d.Desired != 2 || d.Reason != ReasonFromZero || !d.At.Equal(at) {
		t.Fatalf("kick decided %+v; want 2 (%s) at %s", d, ReasonFromZero, at)
	}
}

// TestArrivalsKeepAwake: requests that come and go between samples (none in flight at the
// sample) still count as activity for scale-to-zero.
func TestArrivalsKeepAwake(t *testing.T) {
	s := base()
	var h History
	cur := int64(1)
	for i := range 60 {
		var d Decision
		h, d = Step(s, h, cur, Sample{At: t0.Add(time.Duration(i) * time.Second), Arrived: 3})
		if d.Changed() {
			t.Fatalf("at %ds: %+v; requests arrived every interval", i, d)
		}
	}
}

// TestInputsRecorded: a decision carries what it was made from.
func TestInputsRecorded(t *testing.T) {
	s := base()
	var h History
	for i := range 5 {
		h, _ = Step(s, h, 10, Sample{At: t0.Add(time.Duration(i) * time.Second), InFlight: 7})
	}
	_, d := Step(s, h, 10, Sample{At: t0.Add(5 * time.Second), InFlight: 1})
	want := Inputs{Load: 1, AverageLoad: 36.0 / 6, UpNeed: 9, RecentNeed: 2, PeakNeed: 10}
	if d.Inputs != want || d.Reason != ReasonSteady {
		t.Fatalf("inputs %+v (%s); want %+v (%s)", d.Inputs, d.Reason, want, ReasonSteady)
	}
}

// TestHistoryIsAValue: Step never changes the history it is given.
func TestHistoryIsAValue(t *testing.T) {
	s := base()
	var h History
	for i := range 8 {
		h, _ = Step(s, h, 1, Sample{At: t0.Add(time.Duration(i) * time.Second), InFlight: 3})
	}
	before := h.Len()
	old := h.samples[0]
	_, _ = Step(s, h, 1, Sample{At: t0.Add(9 * time.Second), InFlight: 9})
	if h.Len() != before || h.samples[0] != old {
		t.Fatal("Step changed the history it was given")
	}
}

// TestBounded: the history stays small whatever the delays and the load.
func TestBounded(t *testing.T) {
	s := base()
	s.ScaleDownDelay = 7 * 24 * time.Hour
	var h History
	cur := int64(1)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		var d Decision
		h, d = Step(s, h, cur, Sample{At: t0.Add(time.Duration(i) * time.Second), InFlight: r.Int64N(1000)})
		cur = d.Desired
	}
	if len(h.samples) > UpWindow || int64(len(h.neededAt)) > s.Max {
		t.Fatalf("history holds %d samples and %d need times; bounds %d and %d", len(h.samples), len(h.neededAt), UpWindow, s.Max)
	}
	// Lowering max shrinks it.
	s.Max = 3
	h, _ = Step(s, h, cur, Sample{At: t0.Add(20001 * time.Second), InFlight: 1})
	if len(h.neededAt) > 3 {
		t.Fatalf("need times %d after max 3", len(h.neededAt))
	}
}

// TestNoDecisionUnderNoise: constant load with ±10% noise, from the count the mean load
// needs, makes no decision at all (DESIGN 4): an hour at each of several levels, among them
// levels whose noise crosses the boundaries between counts.
func TestNoDecisionUnderNoise(t *testing.T) {
	for _, level := range []int64{10, 14, 20, 35, 60, 63} {
		s := base()
		s.Max = 100
		s.ScaleDownDelay = 30 * time.Second
		r := rand.New(rand.NewPCG(uint64(level), 7))
		var h History
		cur := s.Need(level)
		for i := range 3600 {
			noise := r.Int64N(2*(level/10)+1) - level/10 // within ±10%
			var d Decision
			h, d = Step(s, h, cur, Sample{At: t0.Add(time.Duration(i) * time.Second), InFlight: level + noise, Arrived: 1})
			if d.Changed() {
				t.Fatalf("load %d±10%% at %ds: %d -> %d (%s, %+v); want no decision at all", level, i, d.From, d.Desired, d.Reason, d.Inputs)
			}
		}
	}
}

// TestHeldRequestsAndMaxDoNotDelayTheStepDown: after a burst at max_instances with held
// requests, whose router kicks the rule out of turn, every step down comes scale_down_delay
// after the need fell, no later: the kicks add no sample to the short window, and the
// up check, which cannot go past max_instances, does not stand in the way of the step down.
func TestHeldRequestsAndMaxDoNotDelayTheStepDown(t *testing.T) {
	s := base()
	s.Min, s.Max, s.ScaleDownDelay = 1, 4, 2*time.Second
	var h History
	cur := int64(4)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var downs []time.Time
	step := func(x Sample) {
		t.Helper()
		var d Decision
		h, d = Step(s, h, cur, x)
		if d.Changed() {
			if d.Desired > d.From {
				t.Fatalf("at %s: up %d -> %d (%s)", x.At.Sub(t0), d.From, d.Desired, d.Reason)
			}
			downs = append(downs, x.At)
			cur = d.Desired
		}
	}
	// 10 s of a burst far above what max_instances serve, with held requests kicking the
	// rule ten times a second.
	for ms := 0; ms < 10000; ms += 100 {
		if ms%1000 == 0 {
			step(Sample{At: at(ms), InFlight: 20, Arrived: 10})
		} else {
			step(Sample{At: at(ms), InFlight: 20, Kick: true})
		}
	}
	if h.Len() > UpWindow || cur != 4 {
		t.Fatalf("after the burst: %d samples in the window, count %d", h.Len(), cur)
	}
	// The burst ends: one request in flight (need 2), then a steady load the minimum serves.
	for sec := 10; sec < 30; sec++ {
		load := int64(1)
		if sec >= 15 {
			load = 0
		}
		step(Sample{At: at(sec * 1000), InFlight: load, Arrived: load})
	}
	// The burst's last sample is at 9 s: down to 2 at 11 s, the delay later; to 1 (min) at
	// 16 s, the delay after the need of 2 was last sampled (at 14 s).
	want := []time.Time{at(11000), at(16000)}
	if len(downs) != len(want) || !downs[0].Equal(want[0]) || !downs[1].Equal(want[1]) {
		var got []time.Duration
		for _, d := range downs {
			got = append(got, d.Sub(t0))
		}
		t.Fatalf("steps down at %v; want at 11s and 16s", got)
	}
}

// A kick out of turn decides from zero at once, and nothing else.
func TestKickDecidesOnlyFromZero(t *testing.T) {
	s := base()
	h, d := Step(s, History{}, 0, Sample{At: t0, InFlight: 3, Kick: true})
	if d.Desired != 5 || d.Reason != ReasonFromZero || h.Len() != 0 || !h.LastRequest().Equal(t0) {
		t.Fatalf("kick at zero: %+v, %d samples; want 0 -> 5 from zero, no sample, the request seen", d, h.Len())
	}
	h, d = Step(s, h, 2, Sample{At: t0.Add(time.Second), InFlight: 30, Kick: true})
	if d.Changed() || h.Len() != 0 {
		t.Fatalf("kick at 2 with 30 in flight: %+v, %d samples; want no decision and no sample", d, h.Len())
	}
}

// TestSquareWave: load switching between two levels with a period longer than the delays
// moves at most one step up and one down per period.
func TestSquareWave(t *testing.T) {
	s := base()
	s.Min = 1
	var loads []int64
	for range 5 {
		loads = append(loads, cat(repeat(7, 30), repeat(1, 30))...)
	}
	events, _ := run(s, 1, loads)
	ups, downs := 0, 0
	for _, e := range events {
		if e.to > e.from {
			ups++
		} else {
			downs++
		}
	}
	// One step up per rise, one step down per fall.
	if downs > 5 || ups > 5 {
		t.Fatalf("%d ups, %d downs over 5 periods: %+v", ups, downs, events)
	}
}
