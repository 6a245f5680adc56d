// Package schedule decides when a compute instance's schedules fire. It is pure: every
// function takes the times it needs as arguments, reads no clock, keeps no state and starts
// no goroutine, so each rule below is a table test with fixed times. The engine keeps the
// next firing of every instance in its timer queue (internal/engine/timerqueue) and asks
// Missed once when it starts again.
//
// # Cron expressions
//
// A schedule's cron is a standard five-field expression, "minute hour day-of-month month
// day-of-week" (e.g. "0 18 * * 1-5": 18:00 Monday to Friday), parsed by
// github.com/robfig/cron/v3 with the usual crontab rules: ranges, lists, steps, month and
// weekday names, and when both day-of-month and day-of-week are restricted a day matching
// either fires. Not accepted: a seconds field, descriptors such as "@daily" or "@every 1h",
// and a "TZ=" or "CRON_TZ=" prefix (the time zone is the schedule's time_zone). An expression
// that matches no date at all ("0 0 30 2 *") is refused when parsed.
//
// # Time zones
//
// The cron is read in the schedule's IANA time zone ("" means UTC; "Local" is refused
// because it would depend on the machine the engine runs on). The package imports
// time/tzdata, so zones load on machines without /usr/share/zoneinfo. Firings are returned
// in UTC.
//
// # Daylight saving time
//
// A schedule fires at wall-clock times in its zone, and each matching wall-clock time fires
// at most once:
//
//   - Spring forward: a wall-clock time that does not exist on the change day is skipped
//     that day. This is robfig/cron's documented behaviour ("jobs scheduled during
//     daylight-savings leap-ahead transitions will not be run"), kept as is: "30 2 * * *" in
//     Europe/Berlin does not fire on the last Sunday of March (02:00 jumps to 03:00) and
//     fires again at 02:30 the next day. It is not moved to 03:00. An hourly "0 * * * *"
//     has one firing less that day.
//   - Fall back: a wall-clock time that happens twice fires once, at its first occurrence
//     (the summer-time one). robfig/cron alone would fire it twice (01:30 EDT and 01:30 EST
//     in America/New_York); Next skips the second occurrence. An hourly "0 * * * *"
//     therefore fires once in the repeated hour, and the next firing comes two real hours
//     later.
//
// Start and Stop are state changes, not jobs, so firing a repeated wall-clock time twice
// would do nothing useful, and skipping a leap-ahead time once a year is what users of
// cron expect.
//
// # Missed firings
//
// DESIGN section 4: a firing missed while the engine was down is applied once when it comes
// back. Missed returns only the LATEST firing in (lastSeen, now] across all of an
// instance's enabled schedules, because Start and Stop set a state: applying every missed
// firing in order ends in the state the latest one sets, and applying only that one avoids
// starting an instance just to stop it again. If the engine missed Start at 08:00 and Stop
// at 19:00, Missed returns the Stop.
//
// # Ties
//
// When several firings fall at the same instant (a Start and a Stop schedule with the same
// time), Stop wins: an ambiguous configuration never leaves an instance running and costing
// money. Among firings with the same action and instant, the smallest Key wins, so the
// result never depends on the order of the entries. NextFiring and Missed both apply this
// rule.
package schedule
