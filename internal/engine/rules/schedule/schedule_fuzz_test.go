package schedule

import (
	"testing"
	"time"
)

// FuzzParseCron parses arbitrary cron expressions. It must never panic; an accepted one
// fires, strictly after any start time, within five years (it matches some date, and
// every date recurs within five years, 29 February included), and at a whole minute.
func FuzzParseCron(f *testing.F) {
	for _, seed := range []string{
		"0 19 * * *", "*/15 * * * 1-5", "0 0 29 2 *", "0 0 30 2 *", "0 0 31 4,6 *", "@daily",
		"TZ=UTC 0 0 * * *", "* * * * * *", "", "0 0 * * 7", "0-59/0 * * * *", "60 * * * *",
		"0 0 1-31/2 * *", "0 0 L * *", "0 0 ? * MON", "5-1 * * * *", "0 0 * JAN-DEC SUN-SAT",
	} {
		f.Add(seed, int64(0))
	}
	base := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string, offsetMinutes int64) {
		c, err := ParseCron(expr)
		if err != nil {
			return
		}
		after := base.Add(time.Duration(offsetMinutes%(60*24*366*4)) * time.Minute)
		for _, zone := range []string{"UTC", "Europe/Berlin", "America/New_York"} {
			loc, err := LoadLocation(zone)
			if err != nil {
				t.Fatal(err)
			}
			next := c.next(loc, after)
			if next.IsZero() || !next.After(after) || next.Sub(after) > 5*366*24*time.Hour {
				t.Fatalf("%q in %s after %s: next %s; want a firing within five years", expr, zone, after, next)
			}
			if next.Second() != 0 || next.Nanosecond() != 0 {
				t.Fatalf("%q in %s: next %s is not at a whole minute", expr, zone, next)
			}
		}
	})
}
