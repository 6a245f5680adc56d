package schedule

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // zones load without /usr/share/zoneinfo

	"github.com/robfig/cron/v3"
)

// Schedule actions.
const (
	ActionStart = "Start"
	ActionStop  = "Stop"
)

// CronForm names the five fields of a cron expression, for messages.
const CronForm = "minute hour day-of-month month day-of-week"

// Entry is one schedule of an instance, as stored.
type Entry struct {
	// Key identifies the schedule to the caller (for example the compute ID and the
	// schedule's index); it is copied into the Firing.
	Key      string
	Action   string // ActionStart or ActionStop; not checked here
	Cron     string // five fields, read in TimeZone
	TimeZone string // IANA name; "" means UTC
	Enabled  bool
}

// Firing is one firing of a schedule.
type Firing struct {
	Key    string
	Action string
	At     time.Time // UTC
}

// parser reads exactly the five standard fields: no seconds, no descriptors.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// anyYear is where ParseCron looks for a first firing. Whether an expression matches any
// date does not depend on the year (robfig/cron looks five years ahead, which covers 29
// February), so a fixed reference keeps parsing free of the clock.
var anyYear = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// Cron is a parsed cron expression.
type Cron struct {
	spec *cron.SpecSchedule
}

// ParseCron parses a standard five-field cron expression (CronForm). The error says why the
// expression is wrong, without repeating it.
func ParseCron(expr string) (Cron, error) {
	trimmed := strings.TrimSpace(expr)
	switch {
	case trimmed == "":
		return Cron{}, errors.New("it is empty")
	case strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ="):
		return Cron{}, errors.New("a time zone prefix is not allowed in the expression; set time_zone instead")
	case strings.HasPrefix(trimmed, "@"):
		return Cron{}, errors.New("descriptors such as @daily are not supported; write the five fields")
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return Cron{}, err
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok { // the parser above only makes SpecSchedules
		return Cron{}, fmt.Errorf("unexpected schedule type %T", s)
	}
	c := Cron{spec: spec}
	if c.next(time.UTC, anyYear).IsZero() {
		return Cron{}, errors.New("it matches no date (such as 30 February)")
	}
	return c, nil
}

// locations caches loaded zones by name: time.LoadLocation reads the zone file each time.
var locations sync.Map // string -> *time.Location

// LoadLocation loads an IANA time zone. "" and "UTC" are UTC; "Local" is refused because
// its meaning depends on the machine the engine runs on.
func LoadLocation(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`"Local" depends on the machine the engine runs on`)
	}
	if loc, ok := locations.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	locations.Store(name, loc)
	return loc, nil
}

// Next returns the next firing of an entry strictly after the given time (in UTC),
// following the cron in its time zone, or the zero time when the entry never fires (it is
// disabled). The package documentation explains what happens at daylight saving changes.
func Next(e Entry, after time.Time) (time.Time, error) {
	if !e.Enabled {
		return time.Time{}, nil
	}
	c, loc, err := e.parse()
	if err != nil {
		return time.Time{}, err
	}
	return c.next(loc, after), nil
}

// NextFiring returns the earliest firing strictly after the given time across the enabled
// entries, and false when none of them ever fires. At a tie the firing that wins (see the
// package documentation) is returned. The engine puts it in its timer queue.
func NextFiring(entries []Entry, after time.Time) (Firing, bool, error) {
	var best Firing
	found := false
	for _, e := range entries {
		if !e.Enabled {
			continue
		}
		c, loc, err := e.parse()
		if err != nil {
			return Firing{}, false, err
		}
		at := c.next(loc, after)
		if at.IsZero() {
			continue
		}
		f := Firing{Key: e.Key, Action: e.Action, At: at}
		if !found || f.At.Before(best.At) || f.At.Equal(best.At) && wins(f, best) {
			best, found = f, true
		}
	}
	return best, found, nil
}

// Missed returns, for an engine that was down between lastSeen and now, the single firing
// to apply when it comes back: across the enabled entries, the LATEST firing in
// (lastSeen, now], or false when there is none. Only the latest is applied (see the package
// documentation): Start at 08:00 and Stop at 19:00 both missed gives the Stop. A zero
// lastSeen (the engine never ran this instance's schedules) misses nothing; the caller
// passes the later of when it last ran the schedules and when they were last changed, so a
// schedule never fires for a time before it existed.
func Missed(entries []Entry, lastSeen, now time.Time) (Firing, bool, error) {
	if lastSeen.IsZero() || !now.After(lastSeen) {
		return Firing{}, false, nil
	}
	var best Firing
	found := false
	for _, e := range entries {
		if !e.Enabled {
			continue
		}
		c, loc, err := e.parse()
		if err != nil {
			return Firing{}, false, err
		}
		at, ok := c.latest(loc, lastSeen, now)
		if !ok {
			continue
		}
		f := Firing{Key: e.Key, Action: e.Action, At: at}
		if !found || f.At.After(best.At) || f.At.Equal(best.At) && wins(f, best) {
			best, found = f, true
		}
	}
	return best, found, nil
}

// wins reports whether a is applied rather than b when both fire at the same instant: Stop
// first, then the smallest key.
func wins(a, b Firing) bool {
	if (a.Action == ActionStop) != (b.Action == ActionStop) {
		return a.Action == ActionStop
	}
	return a.Key < b.Key
}

func (e Entry) parse() (Cron, *time.Location, error) {
	c, err := ParseCron(e.Cron)
	if err != nil {
		return Cron{}, nil, fmt.Errorf("reading schedule %s: cron %q: %w", e.Key, e.Cron, err)
	}
	loc, err := LoadLocation(e.TimeZone)
	if err != nil {
		return Cron{}, nil, fmt.Errorf("reading schedule %s: time zone %q: %w", e.Key, e.TimeZone, err)
	}
	return c, loc, nil
}

// next returns the first firing strictly after t in loc, in UTC, or the zero time when
// there is none within five years. A wall-clock time repeated when clocks go back fires at
// its first occurrence only.
func (c Cron) next(loc *time.Location, after time.Time) time.Time {
	spec := *c.spec
	spec.Location = loc
	t := after
	for {
		n := spec.Next(t)
		if n.IsZero() {
			return n
		}
		n = n.In(loc)
		end, repeated := repeatedSpan(n)
		if !repeated {
			return n.UTC()
		}
		// Every wall-clock time in [start, end) was already shown before the clocks went
		// back; resume at end (Next is strictly after its argument, to the second).
		t = end.Add(-time.Nanosecond)
	}
}

// repeatedSpan reports whether t's wall-clock time was already shown earlier because the
// clocks went back, and when the repeated span ends.
func repeatedSpan(t time.Time) (end time.Time, repeated bool) {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return time.Time{}, false
	}
	_, before := start.Add(-time.Nanosecond).Zone()
	_, now := t.Zone()
	back := time.Duration(before-now) * time.Second
	if back <= 0 {
		return time.Time{}, false
	}
	end = start.Add(back)
	return end, t.Before(end)
}

// latest returns the last firing in (lastSeen, now]. It looks back from now over windows
// that double in length, so the work is proportional to the firings near the answer, not to
// the length of the outage (a one-minute cron after a month down costs a few steps).
func (c Cron) latest(loc *time.Location, lastSeen, now time.Time) (time.Time, bool) {
	span := now.Sub(lastSeen)
	for w := time.Minute; ; {
		from := lastSeen
		if w < span {
			from = now.Add(-w)
		}
		var last time.Time
		for t := c.next(loc, from); !t.IsZero() && !t.After(now); t = c.next(loc, t) {
			last = t
		}
		if !last.IsZero() {
			return last, true
		}
		if from.Equal(lastSeen) {
			return time.Time{}, false
		}
		if w > span/2 {
			w = span
		} else {
			w *= 2
		}
	}
}

// NextIn returns the first firing of the cron strictly after the given time, reading the
// cron in loc, in UTC; the zero time when there is none within five years. Daylight saving
// is handled as the package documentation says.
func (c Cron) NextIn(loc *time.Location, after time.Time) time.Time { return c.next(loc, after) }

// LatestIn returns the last firing of the cron in (from, to], reading it in loc, or false
// when there is none.
func (c Cron) LatestIn(loc *time.Location, from, to time.Time) (time.Time, bool) {
	if !to.After(from) {
		return time.Time{}, false
	}
	return c.latest(loc, from, to)
}
