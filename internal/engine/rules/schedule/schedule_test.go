package schedule

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// at parses an RFC 3339 time with its UTC offset, so each case shows the local wall clock
// and which side of a DST change it is on.
func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func entry(action, cron, tz string) Entry {
	return Entry{Key: action + " " + cron, Action: action, Cron: cron, TimeZone: tz, Enabled: true}
}

const (
	berlin  = "Europe/Berlin"
	newYork = "America/New_York"
)

// 2025 DST changes used below:
//   Europe/Berlin     30 March  02:00 CET  -> 03:00 CEST;  26 October  03:00 CEST -> 02:00 CET
//   America/New_York   9 March  02:00 EST  -> 03:00 EDT;   2 November 02:00 EDT  -> 01:00 EST

func TestNext(t *testing.T) {
	weekdays18 := entry(ActionStop, "0 18 * * 1-5", berlin)
	for _, tc := range []struct {
		name  string
		e     Entry
		after string
		want  string // "" means never
	}{
		// Weekday schedule in Europe/Berlin.
		{"weekday: friday evening to monday", weekdays18, "2025-01-10T18:00:00+01:00", "2025-01-13T18:00:00+01:00"},
		{"weekday: just before", weekdays18, "2025-01-13T17:59:59+01:00", "2025-01-13T18:00:00+01:00"},
		{"weekday: strictly after", weekdays18, "2025-01-13T18:00:00+01:00", "2025-01-14T18:00:00+01:00"},
		{"weekday: sub-second before", weekdays18, "2025-01-13T17:59:59.5+01:00", "2025-01-13T18:00:00+01:00"},
		{"weekday: sub-second after", weekdays18, "2025-01-13T18:00:00.5+01:00", "2025-01-14T18:00:00+01:00"},
		{"weekday: saturday", weekdays18, "2025-01-11T09:00:00+01:00", "2025-01-13T18:00:00+01:00"},
		{"weekday: summer time", weekdays18, "2025-07-04T18:00:00+02:00", "2025-07-07T18:00:00+02:00"},
		{"weekday: across spring forward", weekdays18, "2025-03-28T18:00:00+01:00", "2025-03-31T18:00:00+02:00"},
		{"weekday: across fall back", weekdays18, "2025-10-24T18:00:00+02:00", "2025-10-27T18:00:00+01:00"},
		{"weekday: after given in UTC", weekdays18, "2025-01-13T16:59:00Z", "2025-01-13T18:00:00+01:00"},

		// Spring forward: 02:30 does not exist on the change day; robfig/cron skips it
		// that day (not moved to 03:00) and fires the next day.
		{"berlin spring: 02:30 skipped on change day", entry(ActionStop, "30 2 * * *", berlin), "2025-03-29T02:30:00+01:00", "2025-03-31T02:30:00+02:00"},
		{"berlin spring: from just before the gap", entry(ActionStop, "30 2 * * *", berlin), "2025-03-30T01:59:00+01:00", "2025-03-31T02:30:00+02:00"},
		{"berlin spring: hourly jumps the gap", entry(ActionStop, "0 * * * *", berlin), "2025-03-30T01:00:00+01:00", "2025-03-30T03:00:00+02:00"},
		{"berlin spring: 03:00 still fires", entry(ActionStart, "0 3 * * *", berlin), "2025-03-29T03:00:00+01:00", "2025-03-30T03:00:00+02:00"},
		{"new york spring: 02:30 skipped", entry(ActionStop, "30 2 * * *", newYork), "2025-03-08T02:30:00-05:00", "2025-03-10T02:30:00-04:00"},
		{"new york spring: yearly 9 march 02:30 waits a year", entry(ActionStop, "30 2 9 3 *", newYork), "2025-01-01T00:00:00-05:00", "2026-03-09T02:30:00-04:00"},

		// Fall back: the repeated wall-clock time fires once, at its first (summer-time)
		// occurrence.
		{"berlin fall: first 02:30 fires", entry(ActionStop, "30 2 * * *", berlin), "2025-10-25T02:30:00+02:00", "2025-10-26T02:30:00+02:00"},
		{"berlin fall: second 02:30 does not", entry(ActionStop, "30 2 * * *", berlin), "2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"},
		{"berlin fall: from inside the repeated hour", entry(ActionStop, "30 2 * * *", berlin), "2025-10-26T02:10:00+01:00", "2025-10-27T02:30:00+01:00"},
		{"new york fall: first 01:30 fires", entry(ActionStop, "30 1 * * *", newYork), "2025-11-01T01:30:00-04:00", "2025-11-02T01:30:00-04:00"},
		{"new york fall: second 01:30 does not", entry(ActionStop, "30 1 * * *", newYork), "2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"},
		// robfig/cron alone answers 2025-11-02T01:30:00-05:00 here (its own test suite
		// asserts that); Next skips it.
		{"new york fall: between the two 01:30s", entry(ActionStop, "30 1 * * *", newYork), "2025-11-02T01:45:00-04:00", "2025-11-03T01:30:00-05:00"},
		{"new york fall: hourly fires once in the repeated hour", entry(ActionStop, "0 * * * *", newYork), "2025-11-02T01:00:00-04:00", "2025-11-02T02:00:00-05:00"},
		{"new york fall: minutely skips the repeated hour", entry(ActionStop, "* * * * *", newYork), "2025-11-02T01:59:00-04:00", "2025-11-02T02:00:00-05:00"},
		{"new york fall: 02:00 is not repeated", entry(ActionStart, "0 2 * * *", newYork), "2025-11-01T02:00:00-04:00", "2025-11-02T02:00:00-05:00"},
		// A 30-minute DST shift (+11:00 -> +10:30 at 02:00): 01:45 happens twice.
		{"lord howe fall: half-hour shift", entry(ActionStop, "45 1 * * *", "Australia/Lord_Howe"), "2025-04-06T01:45:00+11:00", "2025-04-07T01:45:00+10:30"},

		// Time zones and calendar.
		{"empty time zone is UTC", entry(ActionStop, "0 19 * * *", ""), "2025-01-01T12:00:00Z", "2025-01-01T19:00:00Z"},
		{"UTC", entry(ActionStop, "0 19 * * *", "UTC"), "2025-01-01T19:00:00Z", "2025-01-02T19:00:00Z"},
		{"29 february", entry(ActionStart, "0 0 29 2 *", ""), "2025-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"day of month or day of week", entry(ActionStart, "0 0 1 * 1", ""), "2025-01-01T00:00:00Z", "2025-01-06T00:00:00Z"},
		{"names", entry(ActionStart, "0 9 * JAN-MAR MON-FRI", ""), "2025-03-31T09:00:00Z", "2026-01-01T09:00:00Z"},

		// Disabled entries never fire.
		{"disabled", Entry{Key: "k", Action: ActionStop, Cron: "* * * * *", Enabled: false}, "2025-01-01T00:00:00Z", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Next(tc.e, at(tc.after))
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if !got.IsZero() {
					t.Fatalf("Next = %s; want never", got)
				}
				return
			}
			if !got.Equal(at(tc.want)) {
				loc, _ := LoadLocation(tc.e.TimeZone)
				t.Fatalf("Next = %s (%s); want %s", got.In(loc).Format(time.RFC3339), got, tc.want)
			}
			if got.Location() != time.UTC {
				t.Fatalf("Next = %s; want it in UTC", got)
			}
		})
	}
}

// TestNextEachWallClockTimeOnce walks a whole year of a half-hourly schedule and checks that
// every local wall-clock time fires exactly once, except the two that do not exist on the
// spring-forward day.
func TestNextEachWallClockTimeOnce(t *testing.T) {
	for _, tz := range []string{berlin, newYork, "Australia/Lord_Howe", "UTC"} {
		t.Run(tz, func(t *testing.T) {
			e := entry(ActionStop, "0,30 * * * *", tz)
			loc, err := LoadLocation(tz)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Date(2025, 1, 1, 0, 0, 0, 0, loc)
			end := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
			seen := map[string]bool{}
			prev := start.Add(-time.Second)
			for {
				n, err := Next(e, prev)
				if err != nil {
					t.Fatal(err)
				}
				if !n.After(prev) {
					t.Fatalf("Next(%s) = %s is not after it", prev, n)
				}
				if !n.Before(end) {
					break
				}
				wall := n.In(loc).Format("2006-01-02 15:04")
				if seen[wall] {
					t.Fatalf("%s fired twice", wall)
				}
				seen[wall] = true
				prev = n
			}
			want := 365 * 48
			switch tz {
			case berlin, newYork:
				want -= 2 // 02:00 and 02:30 do not exist on the spring-forward day
			case "Australia/Lord_Howe":
				want-- // clocks jump from 02:00 to 02:30: only 02:00 does not exist
			}
			if len(seen) != want {
				t.Fatalf("%d firings; want %d", len(seen), want)
			}
		})
	}
}

// TestRobfigAloneFiresRepeatedTimeTwice pins the library behaviour Next corrects, so an
// upgrade of robfig/cron that changes it is noticed.
func TestRobfigAloneFiresRepeatedTimeTwice(t *testing.T) {
	c, err := ParseCron("30 1 * * *")
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := LoadLocation(newYork)
	spec := *c.spec
	spec.Location = loc
	if got, want := spec.Next(at("2025-11-02T01:45:00-04:00")), at("2025-11-02T01:30:00-05:00"); !got.Equal(want) {
		t.Fatalf("robfig/cron Next = %s; want %s (the repeated 01:30)", got, want)
	}
}

func TestNextErrors(t *testing.T) {
	for _, e := range []Entry{
		{Key: "a", Cron: "0 25 * * *", Enabled: true},
		{Key: "b", Cron: "0 18 * * 1-5", TimeZone: "Europe/Berlinn", Enabled: true},
		{Key: "c", Cron: "0 18 * * 1-5", TimeZone: "Local", Enabled: true},
	} {
		if _, err := Next(e, at("2025-01-01T00:00:00Z")); err == nil || !strings.Contains(err.Error(), "schedule "+e.Key) {
			t.Errorf("Next(%+v) error = %v; want one naming the schedule", e, err)
		}
	}
}

func TestParseCron(t *testing.T) {
	for _, tc := range []struct {
		expr string
		err  string // "" means valid
	}{
		{"0 18 * * 1-5", ""},
		{"*/15 9-17 * * MON-FRI", ""},
		{"0 0 1,15 * *", ""},
		{"30 7 * JAN,JUL ?", ""},
		{"0 0 29 2 *", ""},
		{" 0 18 * * 1-5 ", ""},
		{"", "empty"},
		{"   ", "empty"},
		{"0 18 * *", "expected exactly 5 fields"},
		{"0 0 18 * * 1-5", "expected exactly 5 fields"},
		{"@daily", "descriptors"},
		{"@every 1h", "descriptors"},
		{"TZ=Europe/Berlin 0 18 * * *", "time_zone"},
		{"CRON_TZ=Europe/Berlin 0 18 * * *", "time_zone"},
		{"60 * * * *", "above maximum"},
		{"0 24 * * *", "above maximum"},
		{"x * * * *", "failed to parse"},
		{"0 0 30 2 *", "matches no date"},
		{"0 0 31 4,6,9,11 *", "matches no date"},
	} {
		_, err := ParseCron(tc.expr)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseCron(%q) = %v; want valid", tc.expr, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseCron(%q) = %v; want an error containing %q", tc.expr, err, tc.err)
		}
	}
}

func TestLoadLocation(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string // "" means an error
	}{
		{"", "UTC"},
		{"UTC", "UTC"},
		{berlin, berlin},
		{newYork, newYork},
		{"Asia/Kolkata", "Asia/Kolkata"},
		{"Local", ""},
		{"Mars/Olympus_Mons", ""},
		{"../../etc/passwd", ""},
	} {
		loc, err := LoadLocation(tc.name)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("LoadLocation(%q) = %v; want an error", tc.name, loc)
		case tc.want != "" && (err != nil || loc.String() != tc.want):
			t.Errorf("LoadLocation(%q) = %v, %v; want %s", tc.name, loc, err, tc.want)
		}
	}
}

func TestNextFiring(t *testing.T) {
	start := entry(ActionStart, "0 8 * * 1-5", berlin)
	stop := entry(ActionStop, "0 19 * * 1-5", berlin)
	startAt19 := entry(ActionStart, "0 19 * * *", berlin)
	startAt19.Key = "a"
	for _, tc := range []struct {
		name    string
		entries []Entry
		after   string
		want    Firing // zero At means none
	}{
		{"morning start", []Entry{start, stop}, "2025-01-13T07:00:00+01:00", Firing{start.Key, ActionStart, at("2025-01-13T08:00:00+01:00")}},
		{"evening stop", []Entry{start, stop}, "2025-01-13T08:00:00+01:00", Firing{stop.Key, ActionStop, at("2025-01-13T19:00:00+01:00")}},
		{"weekend", []Entry{start, stop}, "2025-01-10T19:00:00+01:00", Firing{start.Key, ActionStart, at("2025-01-13T08:00:00+01:00")}},
		{"tie: stop wins", []Entry{startAt19, stop}, "2025-01-13T08:00:00+01:00", Firing{stop.Key, ActionStop, at("2025-01-13T19:00:00+01:00")}},
		{"disabled skipped", []Entry{start, {Key: "x", Action: ActionStop, Cron: "* * * * *"}}, "2025-01-13T07:00:00+01:00", Firing{start.Key, ActionStart, at("2025-01-13T08:00:00+01:00")}},
		{"none", []Entry{{Key: "x", Action: ActionStop, Cron: "* * * * *"}}, "2025-01-13T07:00:00+01:00", Firing{}},
		{"no entries", nil, "2025-01-13T07:00:00+01:00", Firing{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, entries := range [][]Entry{tc.entries, reversed(tc.entries)} {
				got, ok, err := NextFiring(entries, at(tc.after))
				if err != nil {
					t.Fatal(err)
				}
				checkFiring(t, got, ok, tc.want)
			}
		})
	}
}

func TestMissed(t *testing.T) {
	start := entry(ActionStart, "0 8 * * 1-5", berlin)
	stop := entry(ActionStop, "0 19 * * 1-5", berlin)
	startAt19 := entry(ActionStart, "0 19 * * *", berlin)
	startAt19.Key = "a" // sorts before stop's key: the tie is broken by action, not key
	stopB := entry(ActionStop, "0 19 * * *", berlin)
	stopB.Key = "b"
	disabledStop := stop
	disabledStop.Enabled = false
	for _, tc := range []struct {
		name          string
		entries       []Entry
		lastSeen, now string
		want          Firing // zero At means none
	}{
		{"start and stop both missed: stop", []Entry{start, stop}, "2025-01-13T07:00:00+01:00", "2025-01-13T20:00:00+01:00", Firing{stop.Key, ActionStop, at("2025-01-13T19:00:00+01:00")}},
		{"only start missed", []Entry{start, stop}, "2025-01-13T07:00:00+01:00", "2025-01-13T12:00:00+01:00", Firing{start.Key, ActionStart, at("2025-01-13T08:00:00+01:00")}},
		{"now is inclusive", []Entry{start, stop}, "2025-01-13T07:00:00+01:00", "2025-01-13T08:00:00+01:00", Firing{start.Key, ActionStart, at("2025-01-13T08:00:00+01:00")}},
		{"lastSeen is exclusive", []Entry{start, stop}, "2025-01-13T08:00:00+01:00", "2025-01-13T12:00:00+01:00", Firing{}},
		{"nothing missed", []Entry{start, stop}, "2025-01-13T09:00:00+01:00", "2025-01-13T18:59:59+01:00", Firing{}},
		{"down over the weekend", []Entry{start, stop}, "2025-01-10T18:00:00+01:00", "2025-01-13T07:59:00+01:00", Firing{stop.Key, ActionStop, at("2025-01-10T19:00:00+01:00")}},
		{"down for days: latest only", []Entry{start, stop}, "2025-01-06T07:00:00+01:00", "2025-01-09T12:00:00+01:00", Firing{start.Key, ActionStart, at("2025-01-09T08:00:00+01:00")}},
		{"down for a month, minutely", []Entry{entry(ActionStop, "* * * * *", "")}, "2024-12-13T12:00:00Z", "2025-01-13T12:00:30Z", Firing{"Stop * * * * *", ActionStop, at("2025-01-13T12:00:00Z")}},
		{"down for a year, yearly", []Entry{entry(ActionStart, "0 0 1 1 *", berlin)}, "2024-06-01T00:00:00Z", "2025-12-31T00:00:00Z", Firing{"Start 0 0 1 1 *", ActionStart, at("2025-01-01T00:00:00+01:00")}},
		{"long outage, never in window", []Entry{entry(ActionStart, "0 0 29 2 *", "")}, "2025-03-01T00:00:00Z", "2027-12-01T00:00:00Z", Firing{}},
		{"disabled never fires", []Entry{start, disabledStop}, "2025-01-13T07:00:00+01:00", "2025-01-13T20:00:00+01:00", Firing{start.Key, ActionStart, at("2025-01-13T08:00:00+01:00")}},
		{"all disabled", []Entry{disabledStop}, "2025-01-13T07:00:00+01:00", "2025-01-13T20:00:00+01:00", Firing{}},
		{"tie: stop wins over start", []Entry{startAt19, stop}, "2025-01-13T07:00:00+01:00", "2025-01-13T20:00:00+01:00", Firing{stop.Key, ActionStop, at("2025-01-13T19:00:00+01:00")}},
		{"tie: same action, smallest key", []Entry{stop, stopB}, "2025-01-13T07:00:00+01:00", "2025-01-13T20:00:00+01:00", Firing{stop.Key, ActionStop, at("2025-01-13T19:00:00+01:00")}},
		{"zero lastSeen misses nothing", []Entry{start, stop}, "0001-01-01T00:00:00Z", "2025-01-13T20:00:00+01:00", Firing{}},
		{"now before lastSeen", []Entry{start, stop}, "2025-01-13T20:00:00+01:00", "2025-01-13T07:00:00+01:00", Firing{}},
		{"fall back: second 01:30 not missed", []Entry{entry(ActionStop, "30 1 * * *", newYork)}, "2025-11-02T01:45:00-04:00", "2025-11-02T01:45:00-05:00", Firing{}},
		{"fall back: first 01:30 missed", []Entry{entry(ActionStop, "30 1 * * *", newYork)}, "2025-11-02T01:00:00-04:00", "2025-11-02T01:45:00-05:00", Firing{"Stop 30 1 * * *", ActionStop, at("2025-11-02T01:30:00-04:00")}},
		{"spring forward: skipped time not missed", []Entry{entry(ActionStop, "30 2 * * *", berlin)}, "2025-03-30T01:00:00+01:00", "2025-03-30T12:00:00+02:00", Firing{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, entries := range [][]Entry{tc.entries, reversed(tc.entries)} {
				got, ok, err := Missed(entries, at(tc.lastSeen), at(tc.now))
				if err != nil {
					t.Fatal(err)
				}
				checkFiring(t, got, ok, tc.want)
			}
		})
	}
}

func TestMissedError(t *testing.T) {
	bad := Entry{Key: "bad", Action: ActionStop, Cron: "0 25 * * *", Enabled: true}
	if _, _, err := Missed([]Entry{bad}, at("2025-01-01T00:00:00Z"), at("2025-01-02T00:00:00Z")); err == nil || !strings.Contains(err.Error(), "schedule bad") {
		t.Fatalf("Missed error = %v; want one naming the schedule", err)
	}
	if _, _, err := NextFiring([]Entry{bad}, at("2025-01-01T00:00:00Z")); err == nil {
		t.Fatal("NextFiring accepted a bad cron")
	}
}

// TestMissedMatchesBruteForce compares Missed with walking every firing from lastSeen, over
// random windows (fixed seed) around DST changes and weekends.
func TestMissedMatchesBruteForce(t *testing.T) {
	entries := []Entry{
		entry(ActionStart, "0 8 * * 1-5", berlin),
		entry(ActionStop, "0 19 * * 1-5", berlin),
		entry(ActionStop, "30 1 * * 0", newYork),
		entry(ActionStart, "*/20 2 * * *", newYork),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	base := at("2025-03-01T00:00:00Z")
	for i := range 300 {
		lastSeen := base.Add(time.Duration(rng.Int64N(int64(300 * 24 * time.Hour)))).Truncate(time.Minute)
		now := lastSeen.Add(time.Duration(rng.Int64N(int64(10 * 24 * time.Hour))))
		sub := entries[:1+i%len(entries)]
		got, ok, err := Missed(sub, lastSeen, now)
		if err != nil {
			t.Fatal(err)
		}
		want := bruteMissed(t, sub, lastSeen, now)
		checkFiring(t, got, ok, want)
		if t.Failed() {
			t.Fatalf("window (%s, %s]", lastSeen, now)
		}
	}
}

func bruteMissed(t *testing.T, entries []Entry, lastSeen, now time.Time) Firing {
	var best Firing
	for _, e := range entries {
		for n, _ := Next(e, lastSeen); !n.IsZero() && !n.After(now); n, _ = Next(e, n) {
			f := Firing{e.Key, e.Action, n}
			if best.At.IsZero() || f.At.After(best.At) || f.At.Equal(best.At) && wins(f, best) {
				best = f
			}
		}
	}
	return best
}

func checkFiring(t *testing.T, got Firing, ok bool, want Firing) {
	t.Helper()
	if want.At.IsZero() {
		if ok {
			t.Errorf("got %+v; want none", show(got))
		}
		return
	}
	if !ok || got.Key != want.Key || got.Action != want.Action || !got.At.Equal(want.At) {
		t.Errorf("got %s (ok=%v); want %s", show(got), ok, show(want))
	}
	if ok && got.At.Location() != time.UTC {
		t.Errorf("firing at %s is not in UTC", got.At)
	}
}

func show(f Firing) string {
	return fmt.Sprintf("{%s %s %s}", f.Key, f.Action, f.At.UTC().Format(time.RFC3339))
}

func reversed(entries []Entry) []Entry {
	r := slices.Clone(entries)
	slices.Reverse(r)
	return r
}
