package trigger

import (
	"errors"
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestNext(t *testing.T) {
	tests := []struct {
		name  string
		trig  Trigger
		after string
		want  string // "" for none
	}{
		{"cron honours day of month and month", Trigger{Type: TypeCron, Expression: "0 9 15 3 *"}, "2026-01-01T00:00:00Z", "2026-03-15T09:00:00Z"},
		{"cron in an IANA zone", Trigger{Type: TypeCron, Expression: "0 18 * * *", TimeZone: "Europe/Berlin"}, "2026-07-01T00:00:00Z", "2026-07-01T16:00:00Z"},
		{"cron in a Windows zone", Trigger{Type: TypeCron, Expression: "0 18 * * *", TimeZone: "Pacific Standard Time"}, "2026-01-10T00:00:00Z", "2026-01-10T02:00:00Z"},
		{"cron is strictly after", Trigger{Type: TypeCron, Expression: "*/5 * * * *"}, "2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z"},
		{"cron waits for start_time", Trigger{Type: TypeCron, Expression: "0 * * * *", Start: at("2026-02-01T10:30:00Z")}, "2026-01-01T00:00:00Z", "2026-02-01T11:00:00Z"},
		{"a tick at start_time counts", Trigger{Type: TypeCron, Expression: "0 * * * *", Start: at("2026-02-01T10:00:00Z")}, "2026-01-01T00:00:00Z", "2026-02-01T10:00:00Z"},
		{"none after end_time", Trigger{Type: TypeCron, Expression: "0 0 * * *", End: at("2026-01-01T12:00:00Z")}, "2026-01-01T00:00:00Z", ""},
		{"every 5 minutes from start_time", Trigger{Type: TypeRecurrence, Frequency: Minute, Interval: 5, Start: at("2026-01-01T00:02:00Z")}, "2026-01-01T01:00:00Z", "2026-01-01T01:02:00Z"},
		{"every 3 hours before start_time", Trigger{Type: TypeRecurrence, Frequency: Hour, Interval: 3, Start: at("2026-01-01T01:00:00Z")}, "2025-06-01T00:00:00Z", "2026-01-01T01:00:00Z"},
		{"every 2 days at 9 and 17", Trigger{Type: TypeRecurrence, Frequency: Day, Interval: 2, Hours: []int{17, 9}, Start: at("2026-01-01T00:00:00Z")}, "2026-01-01T10:00:00Z", "2026-01-01T17:00:00Z"},
		{"every 2 days skips the odd day", Trigger{Type: TypeRecurrence, Frequency: Day, Interval: 2, Hours: []int{9, 17}, Start: at("2026-01-01T00:00:00Z")}, "2026-01-01T18:00:00Z", "2026-01-03T09:00:00Z"},
		{"day at start_time's hour and minute", Trigger{Type: TypeRecurrence, Frequency: Day, Interval: 1, Start: at("2026-01-01T06:45:00Z")}, "2026-01-05T07:00:00Z", "2026-01-06T06:45:00Z"},
		{"weekly on Monday and Friday", Trigger{Type: TypeRecurrence, Frequency: Week, Interval: 1, WeekDays: []string{"Monday", "friday"}, Hours: []int{8}, Minutes: []int{0}, Start: at("2026-01-01T00:00:00Z")}, "2026-01-02T09:00:00Z", "2026-01-05T08:00:00Z"},
		{"every other week", Trigger{Type: TypeRecurrence, Frequency: Week, Interval: 2, WeekDays: []string{"monday"}, Hours: []int{8}, Minutes: []int{0}, Start: at("2026-01-05T00:00:00Z")}, "2026-01-05T09:00:00Z", "2026-01-19T08:00:00Z"},
		{"monthly on the 31st skips short months", Trigger{Type: TypeRecurrence, Frequency: Month, Interval: 1, Start: at("2026-01-31T12:00:00Z")}, "2026-01-31T12:00:00Z", "2026-03-31T12:00:00Z"},
		{"spring forward skips a missing wall-clock time", Trigger{Type: TypeRecurrence, Frequency: Day, Interval: 1, Hours: []int{2}, Minutes: []int{30}, TimeZone: "Europe/Berlin", Start: at("2026-03-01T00:00:00Z")}, "2026-03-28T12:00:00Z", "2026-03-30T00:30:00Z"},
		{"fall back fires a repeated wall-clock time at its first occurrence", Trigger{Type: TypeRecurrence, Frequency: Day, Interval: 1, Hours: []int{2}, Minutes: []int{30}, TimeZone: "Europe/Berlin", Start: at("2026-03-01T00:00:00Z")}, "2026-10-24T12:00:00Z", "2026-10-25T00:30:00Z"},
		{"fall back fires the repeated time once", Trigger{Type: TypeRecurrence, Frequency: Day, Interval: 1, Hours: []int{2}, Minutes: []int{30}, TimeZone: "Europe/Berlin", Start: at("2026-03-01T00:00:00Z")}, "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"},
		{"cron fires a repeated wall-clock time at its first occurrence", Trigger{Type: TypeCron, Expression: "30 2 * * *", TimeZone: "Europe/Berlin"}, "2026-10-24T12:00:00Z", "2026-10-25T00:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := Next(tt.trig, at(tt.after))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if ok {
					t.Fatalf("Next = %s, want none", got)
				}
				return
			}
			if !ok || !got.Equal(at(tt.want)) {
				t.Fatalf("Next = %s (%v), want %s", got, ok, tt.want)
			}
		})
	}
}

// TestMissedFiresOnceForTheLastTick: an engine down across three ticks fires one run, for
// the last one, with catch_up latest, and none with none.
func TestMissedFiresOnceForTheLastTick(t *testing.T) {
	for _, trig := range []Trigger{
		{Type: TypeCron, Expression: "0 * * * *"},
		{Type: TypeRecurrence, Frequency: Hour, Interval: 1, Start: at("2026-01-01T00:00:00Z")},
		{Type: TypeRecurrence, Frequency: Day, Interval: 1, Hours: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}, Minutes: []int{0}, Start: at("2026-01-01T00:00:00Z")},
	} {
		lastSeen, now := at("2026-01-02T09:30:00Z"), at("2026-01-02T12:40:00Z") // 10:00, 11:00, 12:00 missed
		got, ok, err := Missed(trig, CatchUpLatest, lastSeen, now)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || !got.Equal(at("2026-01-02T12:00:00Z")) {
			t.Errorf("%s/%s: Missed = %s (%v), want 12:00", trig.Type, trig.Frequency, got, ok)
		}
		if _, ok, _ := Missed(trig, CatchUpNone, lastSeen, now); ok {
			t.Errorf("%s/%s: catch_up none fired", trig.Type, trig.Frequency)
		}
		if _, ok, _ := Missed(trig, CatchUpLatest, at("2026-01-02T12:10:00Z"), now); ok {
			t.Errorf("%s/%s: fired with no tick missed", trig.Type, trig.Frequency)
		}
		if _, ok, _ := Missed(trig, CatchUpLatest, time.Time{}, now); ok {
			t.Errorf("%s/%s: a schedule never seen missed a tick", trig.Type, trig.Frequency)
		}
	}
	// A tick after end_time is not missed.
	trig := Trigger{Type: TypeCron, Expression: "0 * * * *", End: at("2026-01-02T10:30:00Z")}
	got, ok, _ := Missed(trig, CatchUpLatest, at("2026-01-02T09:30:00Z"), at("2026-01-02T12:40:00Z"))
	if !ok || !got.Equal(at("2026-01-02T10:00:00Z")) {
		t.Errorf("with end_time: Missed = %s (%v), want 10:00", got, ok)
	}
}

// TestNextAgreesWithMissed walks a day of ticks with Next and checks Missed finds each one
// as the latest of the window ending at it.
func TestNextAgreesWithMissed(t *testing.T) {
	for _, trig := range []Trigger{
		{Type: TypeCron, Expression: "7,37 */3 * * *", TimeZone: "America/New_York"},
		{Type: TypeRecurrence, Frequency: Minute, Interval: 45, Start: at("2026-03-07T00:10:00Z"), TimeZone: "America/New_York"},
		{Type: TypeRecurrence, Frequency: Week, Interval: 1, WeekDays: []string{"sunday", "saturday"}, Hours: []int{1, 2, 3}, Minutes: []int{0, 30}, TimeZone: "America/New_York", Start: at("2026-03-01T00:00:00Z")},
	} {
		prev := at("2026-03-07T00:00:00Z")
		for i := 0; i < 40; i++ {
			next, ok, err := Next(trig, prev)
			if err != nil || !ok {
				t.Fatalf("%v: Next after %s: %v %v", trig, prev, ok, err)
			}
			if !next.After(prev) {
				t.Fatalf("%v: Next(%s) = %s is not after it", trig, prev, next)
			}
			got, ok, _ := Missed(trig, CatchUpLatest, prev, next)
			if !ok || !got.Equal(next) {
				t.Fatalf("%v: Missed(%s, %s) = %s %v, want %s", trig, prev, next, got, ok, next)
			}
			if _, ok, _ := Missed(trig, CatchUpLatest, prev, next.Add(-time.Second)); ok {
				t.Fatalf("%v: a tick between %s and %s that Next skipped", trig, prev, next)
			}
			prev = next
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		trig  Trigger
		field string
	}{
		{Trigger{Type: "hourly"}, "trigger.type"},
		{Trigger{Type: TypeCron, Expression: "0 0 30 2 *"}, "trigger.expression"},
		{Trigger{Type: TypeCron, Expression: "* * * *"}, "trigger.expression"},
		{Trigger{Type: TypeCron, Expression: "0 * * * *", TimeZone: "Mars/Olympus"}, "trigger.time_zone"},
		{Trigger{Type: TypeCron, Expression: "0 * * * *", Start: at("2026-01-02T00:00:00Z"), End: at("2026-01-01T00:00:00Z")}, "trigger.end_time"},
		{Trigger{Type: TypeRecurrence, Frequency: "fortnight", Interval: 1}, "trigger.frequency"},
		{Trigger{Type: TypeRecurrence, Frequency: Day, Interval: 0}, "trigger.interval"},
		{Trigger{Type: TypeRecurrence, Frequency: Day, Interval: 1, Hours: []int{24}}, "trigger.schedule.hours"},
		{Trigger{Type: TypeRecurrence, Frequency: Day, Interval: 1, Minutes: []int{60}}, "trigger.schedule.minutes"},
		{Trigger{Type: TypeRecurrence, Frequency: Week, Interval: 1, WeekDays: []string{"funday"}}, "trigger.schedule.week_days"},
		{Trigger{Type: TypeRecurrence, Frequency: Day, Interval: 1, WeekDays: []string{"monday"}}, "trigger.schedule.week_days"},
		{Trigger{Type: TypeRecurrence, Frequency: Hour, Interval: 1, Hours: []int{1}}, "trigger.schedule"},
	}
	for _, tt := range tests {
		err := Validate(tt.trig)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("Validate(%+v) = %v, want an error on %s", tt.trig, err, tt.field)
		}
	}
	if err := Validate(Trigger{Type: TypeCron, Expression: "0 9 * * 1-5", TimeZone: "W. Europe Standard Time"}); err != nil {
		t.Errorf("a valid trigger: %v", err)
	}
}

func TestOnTick(t *testing.T) {
	tests := []struct {
		overlap string
		active  bool
		want    Action
	}{
		{OverlapForbid, false, Start},
		{OverlapForbid, true, Skip},
		{OverlapAllow, true, Start},
		{OverlapReplace, true, Replace},
		{OverlapReplace, false, Start},
	}
	for _, tt := range tests {
		got, reason := OnTick(tt.overlap, tt.active, "nightly-20260101T000000Z")
		if got != tt.want {
			t.Errorf("OnTick(%s, active=%v) = %v, want %v", tt.overlap, tt.active, got, tt.want)
		}
		if (got == Skip) != (reason != "") {
			t.Errorf("OnTick(%s, active=%v): reason %q", tt.overlap, tt.active, reason)
		}
	}
}

func TestJobName(t *testing.T) {
	tick := time.Date(2026, 3, 29, 3, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	if got, want := JobName("nightly", tick), "nightly-20260329T010000Z"; got != want {
		t.Errorf("JobName = %s, want %s", got, want)
	}
}

// TestWindowsZonesLoad: every Windows name maps to a zone the embedded tzdata holds.
func TestWindowsZonesLoad(t *testing.T) {
	for win, iana := range windowsZones {
		if _, err := LoadLocation(win); err != nil {
			t.Errorf("%q -> %q: %v", win, iana, err)
		}
	}
}
