// Package trigger decides when an mlcompute_schedule starts a job: the next tick of its
// cron or recurrence within start_time and end_time, the one run to fire after the engine
// was down (catch_up), what to do at a tick whose last run is still active (overlap), and
// the name of the job a tick starts. It is pure: times come in as arguments.
//
// # Cron
//
// All five fields are honoured, day of month and month included, with the crontab rules
// of package rules/schedule (which also reads instance schedules): when both day of month
// and day of week are restricted, a day matching either fires.
//
// # Recurrence
//
// frequency minute or hour fires every interval minutes or hours, counted from start_time
// (from 2000-01-01T00:00 in the time zone when there is none). day fires every interval
// days at each schedule.hours x schedule.minutes (start_time's hour and minute when the
// schedule gives none); week fires on schedule.week_days (start_time's weekday when none)
// of every interval-th week, weeks starting on Monday; month fires on start_time's day of
// month every interval months, skipping months that have no such day. Days, weeks and
// months are counted from start_time's (or 2000-01-01's) in the time zone.
//
// # Time zones and daylight saving
//
// time_zone is an IANA name ("Europe/Berlin") or a Windows name ("W. Europe Standard
// Time"), default UTC. Ticks are wall-clock times in that zone. A wall-clock time that
// does not exist on a spring-forward day is skipped that day; one that happens twice on a
// fall-back day fires once, at its first occurrence (as instance schedules do).
//
// # Catch-up and overlap
//
// After downtime, catch_up "latest" fires exactly one run, for the last tick missed, and
// "none" fires none. At a tick whose last run is still active, overlap "forbid" skips the
// tick (recorded with its reason), "allow" starts another run, and "replace" cancels the
// active run first.
package trigger

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/schedule"
)

// Trigger types, recurrence frequencies, overlap and catch-up policies: the API's values
// (package api, which the provider's schema spells too), named as the rule reads them.
const (
	TypeCron       = api.TriggerCron
	TypeRecurrence = api.TriggerRecurrence

	Minute = api.FrequencyMinute
	Hour   = api.FrequencyHour
	Day    = api.FrequencyDay
	Week   = api.FrequencyWeek
	Month  = api.FrequencyMonth

	OverlapAllow   = api.OverlapAllow
	OverlapForbid  = api.OverlapForbid
	OverlapReplace = api.OverlapReplace

	CatchUpNone   = api.CatchUpNone
	CatchUpLatest = api.CatchUpLatest
)

// Types, Frequencies, Overlaps, CatchUps and WeekDays list the allowed values (package api).
var (
	Types       = api.TriggerTypes
	Frequencies = api.Frequencies
	Overlaps    = api.Overlaps
	CatchUps    = api.CatchUps
	WeekDays    = api.WeekDays
)

// Trigger is a schedule's trigger, as stored.
type Trigger struct {
	Type       string
	Expression string // cron
	Frequency  string // recurrence
	Interval   int    // recurrence, >= 1
	Hours      []int  // recurrence schedule, 0..23
	Minutes    []int  // recurrence schedule, 0..59
	WeekDays   []string
	Start, End time.Time // zero: unbounded
	TimeZone   string    // IANA or Windows name; "" is UTC
}

// FieldError is a refusal of one attribute of the trigger.
type FieldError struct {
	Field   string // "trigger.expression"
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// LoadLocation loads a time zone by its IANA or Windows name.
func LoadLocation(name string) (*time.Location, error) {
	if iana, ok := windowsZones[name]; ok {
		return schedule.LoadLocation(iana)
	}
	return schedule.LoadLocation(name)
}

// compiled is a trigger parsed once.
type compiled struct {
	t    Trigger
	cron schedule.Cron
	loc  *time.Location
	// anchor is where recurrence counts from, in loc.
	anchor time.Time
	days   map[time.Weekday]bool
}

// Validate checks a trigger and names the attribute at fault.
func Validate(t Trigger) error {
	_, err := compile(t)
	return err
}

func compile(t Trigger) (*compiled, error) {
	loc, err := LoadLocation(t.TimeZone)
	if err != nil {
		return nil, &FieldError{"trigger.time_zone", fmt.Sprintf("%q is not an IANA or Windows time zone name: %v", t.TimeZone, err)}
	}
	c := &compiled{t: t, loc: loc}
	if !t.Start.IsZero() && !t.End.IsZero() && !t.End.After(t.Start) {
		return nil, &FieldError{"trigger.end_time", "must be after start_time"}
	}
	switch t.Type {
	case TypeCron:
		if c.cron, err = schedule.ParseCron(t.Expression); err != nil {
			return nil, &FieldError{"trigger.expression", fmt.Sprintf("%q is not a cron expression (%s): %v", t.Expression, schedule.CronForm, err)}
		}
		return c, nil
	case TypeRecurrence:
	default:
		return nil, &FieldError{"trigger.type", fmt.Sprintf("%q is not one of %s", t.Type, strings.Join(Types, ", "))}
	}
	if !contains(Frequencies, t.Frequency) {
		return nil, &FieldError{"trigger.frequency", fmt.Sprintf("%q is not one of %s", t.Frequency, strings.Join(Frequencies, ", "))}
	}
	if t.Interval < 1 || t.Interval > 1000 {
		return nil, &FieldError{"trigger.interval", fmt.Sprintf("%d is not between 1 and 1000", t.Interval)}
	}
	for _, h := range t.Hours {
		if h < 0 || h > 23 {
			return nil, &FieldError{"trigger.schedule.hours", fmt.Sprintf("%d is not between 0 and 23", h)}
		}
	}
	for _, m := range t.Minutes {
		if m < 0 || m > 59 {
			return nil, &FieldError{"trigger.schedule.minutes", fmt.Sprintf("%d is not between 0 and 59", m)}
		}
	}
	c.days = map[time.Weekday]bool{}
	for _, d := range t.WeekDays {
		i := indexFold(WeekDays, d)
		if i < 0 {
			return nil, &FieldError{"trigger.schedule.week_days", fmt.Sprintf("%q is not one of %s", d, strings.Join(WeekDays, ", "))}
		}
		c.days[time.Weekday((i+1)%7)] = true
	}
	if (len(t.Hours) > 0 || len(t.Minutes) > 0 || len(t.WeekDays) > 0) && (t.Frequency == Minute || t.Frequency == Hour) {
		return nil, &FieldError{"trigger.schedule", fmt.Sprintf("applies only to frequency day, week or month, not %s", t.Frequency)}
	}
	if len(t.WeekDays) > 0 && t.Frequency != Week {
		return nil, &FieldError{"trigger.schedule.week_days", "applies only to frequency week"}
	}
	c.anchor = time.Date(2000, time.January, 1, 0, 0, 0, 0, loc)
	if !t.Start.IsZero() {
		c.anchor = t.Start.In(loc)
	}
	return c, nil
}

// Next returns the first tick strictly after the given time, within start_time and
// end_time, in UTC; false when there is none.
func Next(t Trigger, after time.Time) (time.Time, bool, error) {
	c, err := compile(t)
	if err != nil {
		return time.Time{}, false, err
	}
	at, ok := c.next(after)
	return at, ok, nil
}

// Missed returns the run to fire for an engine that was down between lastSeen and now:
// with catch_up "latest" the last tick in (lastSeen, now], within start_time and
// end_time; with "none", or when no tick was missed, false. A zero lastSeen misses nothing
// (the caller passes the later of the schedule's last check and its last change, so a
// schedule never fires for a tick before it existed).
func Missed(t Trigger, catchUp string, lastSeen, now time.Time) (time.Time, bool, error) {
	c, err := compile(t)
	if err != nil {
		return time.Time{}, false, err
	}
	if catchUp == CatchUpNone || lastSeen.IsZero() || !now.After(lastSeen) {
		return time.Time{}, false, nil
	}
	if !t.End.IsZero() && now.After(t.End) {
		now = t.End
	}
	at, ok := c.latest(lastSeen, now)
	if !ok || !t.Start.IsZero() && at.Before(t.Start) {
		return time.Time{}, false, nil
	}
	return at, true, nil
}

func (c *compiled) next(after time.Time) (time.Time, bool) {
	if !c.t.Start.IsZero() && after.Before(c.t.Start) {
		after = c.t.Start.Add(-time.Nanosecond)
	}
	var at time.Time
	if c.t.Type == TypeCron {
		at = c.cron.NextIn(c.loc, after)
	} else {
		at = c.nextRecurrence(after)
	}
	if at.IsZero() || !c.t.End.IsZero() && at.After(c.t.End) {
		return time.Time{}, false
	}
	return at.UTC(), true
}

func (c *compiled) latest(from, to time.Time) (time.Time, bool) {
	if c.t.Type == TypeCron {
		return c.cron.LatestIn(c.loc, from, to)
	}
	return c.latestRecurrence(from, to)
}

// period is the fixed step of a minute or hour recurrence.
func (c *compiled) period() time.Duration {
	unit := time.Minute
	if c.t.Frequency == Hour {
		unit = time.Hour
	}
	return time.Duration(c.t.Interval) * unit
}

// horizon bounds the days a calendar recurrence looks through: a monthly one every 1000
// months, the most interval allows, has a tick well inside it.
const horizon = 1000*31 + 366

func (c *compiled) nextRecurrence(after time.Time) time.Time {
	if c.t.Frequency == Minute || c.t.Frequency == Hour {
		p := c.period()
		if after.Before(c.anchor) {
			return c.anchor
		}
		k := after.Sub(c.anchor)/p + 1
		return c.anchor.Add(k * p)
	}
	a := after.In(c.loc)
	day := time.Date(a.Year(), a.Month(), a.Day(), 0, 0, 0, 0, c.loc)
	for i := 0; i < horizon; i++ {
		for _, at := range c.ticksOn(day.AddDate(0, 0, i)) {
			if at.After(after) {
				return at
			}
		}
	}
	return time.Time{}
}

func (c *compiled) latestRecurrence(from, to time.Time) (time.Time, bool) {
	if c.t.Frequency == Minute || c.t.Frequency == Hour {
		if to.Before(c.anchor) {
			return time.Time{}, false
		}
		p := c.period()
		at := c.anchor.Add(to.Sub(c.anchor) / p * p)
		return at, at.After(from)
	}
	t := to.In(c.loc)
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, c.loc)
	for i := 0; i < horizon; i++ {
		d := day.AddDate(0, 0, -i)
		ticks := c.ticksOn(d)
		for j := len(ticks) - 1; j >= 0; j-- {
			if at := ticks[j]; !at.After(to) {
				if at.After(from) {
					return at, true
				}
				return time.Time{}, false
			}
		}
		if d.Before(from) {
			return time.Time{}, false
		}
	}
	return time.Time{}, false
}

// ticksOn returns the ticks of a day, week or month recurrence on the given day (midnight
// in loc), in order.
func (c *compiled) ticksOn(day time.Time) []time.Time {
	a := c.anchor
	anchorDay := time.Date(a.Year(), a.Month(), a.Day(), 0, 0, 0, 0, c.loc)
	if day.Before(anchorDay) {
		return nil
	}
	switch c.t.Frequency {
	case Day:
		if daysBetween(anchorDay, day)%c.t.Interval != 0 {
			return nil
		}
	case Week:
		days := c.days
		if len(days) == 0 {
			days = map[time.Weekday]bool{a.Weekday(): true}
		}
		if !days[day.Weekday()] || daysBetween(monday(anchorDay), monday(day))/7%c.t.Interval != 0 {
			return nil
		}
	case Month:
		months := (day.Year()-anchorDay.Year())*12 + int(day.Month()-anchorDay.Month())
		if day.Day() != a.Day() || months%c.t.Interval != 0 {
			return nil
		}
	}
	hours, minutes := c.t.Hours, c.t.Minutes
	if len(hours) == 0 {
		hours = []int{a.Hour()}
	}
	if len(minutes) == 0 {
		minutes = []int{a.Minute()}
	}
	var out []time.Time
	for _, h := range hours {
		for _, m := range minutes {
			at := time.Date(day.Year(), day.Month(), day.Day(), h, m, 0, 0, c.loc)
			// A wall-clock time skipped by a spring-forward change is not a tick that day.
			if at.Hour() != h || at.Minute() != m {
				continue
			}
			// A wall-clock time that happens twice on a fall-back day (time.Date may give
			// either) is a tick at its first occurrence only.
			for _, back := range []time.Duration{30 * time.Minute, time.Hour} {
				if e := at.Add(-back); e.Day() == at.Day() && e.Hour() == h && e.Minute() == m {
					at = e
					break
				}
			}
			out = append(out, at)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return dedupe(out)
}

func daysBetween(a, b time.Time) int {
	// Dates, not durations: a day with a daylight saving change is still one day.
	ua := time.Date(a.Year(), a.Month(), a.Day(), 0, 0, 0, 0, time.UTC)
	ub := time.Date(b.Year(), b.Month(), b.Day(), 0, 0, 0, 0, time.UTC)
	return int(ub.Sub(ua).Hours() / 24)
}

func monday(day time.Time) time.Time {
	back := (int(day.Weekday()) + 6) % 7
	return day.AddDate(0, 0, -back)
}

func dedupe(ts []time.Time) []time.Time {
	out := ts[:0]
	for i, t := range ts {
		if i == 0 || !t.Equal(ts[i-1]) {
			out = append(out, t)
		}
	}
	return out
}

// Action is what happens at a tick.
type Action int

const (
	// Start a run.
	Start Action = iota + 1
	// Skip the tick: the last run is still active and overlap is forbid.
	Skip
	// Replace: cancel the active run, then start a run.
	Replace
)

// OnTick decides what a tick does, given whether the schedule's last run is still active.
// The reason is recorded with a skipped tick.
func OnTick(overlap string, lastRunActive bool, lastRun string) (Action, string) {
	if !lastRunActive {
		return Start, ""
	}
	switch overlap {
	case OverlapAllow:
		return Start, ""
	case OverlapReplace:
		return Replace, ""
	default:
		return Skip, fmt.Sprintf("the last run %s is still active and overlap is forbid", lastRun)
	}
}

// JobName is the name of the job a tick starts: <schedule>-YYYYMMDDThhmmssZ, the tick in
// UTC.
func JobName(schedule string, tick time.Time) string {
	return schedule + "-" + tick.UTC().Format("20060102T150405Z")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func indexFold(list []string, s string) int {
	for i, v := range list {
		if strings.EqualFold(v, s) {
			return i
		}
	}
	return -1
}
