package idle

import (
	"testing"
	"time"
)

var now = time.Date(2025, 1, 13, 12, 0, 0, 0, time.UTC)

// idleFor is an instance with no jobs or sessions whose last activity was d ago.
func idleFor(d time.Duration) Activity { return Activity{LastActivity: now.Add(-d)} }

func TestDeadline(t *testing.T) {
	const never = time.Duration(0)
	for _, tc := range []struct {
		name      string
		a         Activity
		idleAfter time.Duration
		at        time.Time // when Due is asked; zero means now
		want      time.Time // zero means it cannot stop
		due       bool
	}{
		{"idle past the setting", idleFor(2 * time.Hour), time.Hour, time.Time{}, now.Add(-time.Hour), true},
		{"idle less than the setting", idleFor(40 * time.Minute), time.Hour, time.Time{}, now.Add(20 * time.Minute), false},
		{"exactly at the deadline", idleFor(time.Hour), time.Hour, time.Time{}, now, true},
		{"1ns before the deadline", idleFor(time.Hour), time.Hour, now.Add(-time.Nanosecond), now, false},
		{"running job keeps it awake", Activity{RunningJobs: 1, LastActivity: now.Add(-72 * time.Hour)}, 15 * time.Minute, now.Add(100 * 24 * time.Hour), time.Time{}, false},
		{"open session keeps it awake", Activity{OpenSessions: 2, LastActivity: now.Add(-72 * time.Hour)}, 15 * time.Minute, now.Add(100 * 24 * time.Hour), time.Time{}, false},
		{"job and session", Activity{RunningJobs: 1, OpenSessions: 1}, 15 * time.Minute, time.Time{}, time.Time{}, false},
		{"null setting never stops", idleFor(30 * 24 * time.Hour), never, now.Add(365 * 24 * time.Hour), time.Time{}, false},
		{"negative setting never stops", idleFor(30 * 24 * time.Hour), -time.Minute, time.Time{}, time.Time{}, false},
		{"zero LastActivity is idle since forever", Activity{}, 15 * time.Minute, time.Time{}, time.Time{}.Add(15 * time.Minute), true},
		{"at the maximum setting", idleFor(71 * time.Hour), 72 * time.Hour, time.Time{}, now.Add(time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Deadline(tc.a, tc.idleAfter)
			if ok != !tc.want.IsZero() || !got.Equal(tc.want) {
				t.Fatalf("Deadline = %s, %v; want %s, %v", got, ok, tc.want, !tc.want.IsZero())
			}
			at := tc.at
			if at.IsZero() {
				at = now
			}
			if due := Due(tc.a, tc.idleAfter, at); due != tc.due {
				t.Fatalf("Due at %s = %v; want %v", at, due, tc.due)
			}
		})
	}
}

// TestReportedActivity plays a timeline on a fake clock: each step moves the time, changes
// the activity, and checks the deadline.
func TestReportedActivity(t *testing.T) {
	const setting = 30 * time.Minute
	type step struct {
		name    string
		advance time.Duration
		change  func(a Activity, t time.Time) Activity
		want    time.Duration // deadline as an offset from the start; -1 means cannot stop
		due     bool
	}
	start := now
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"reported activity pushes the deadline", []step{
			{"started", 0, func(a Activity, t time.Time) Activity { return a.Touch(t) }, 30 * time.Minute, false},
			{"activity at 20m", 20 * time.Minute, func(a Activity, t time.Time) Activity { return a.Touch(t) }, 50 * time.Minute, false},
			{"at 49m still up", 29 * time.Minute, nil, 50 * time.Minute, false},
			{"at 50m due", time.Minute, nil, 50 * time.Minute, true},
		}},
		{"late report never moves the clock back", []step{
			{"activity at 0", 0, func(a Activity, t time.Time) Activity { return a.Touch(t) }, 30 * time.Minute, false},
			{"activity at 10m", 10 * time.Minute, func(a Activity, t time.Time) Activity { return a.Touch(t) }, 40 * time.Minute, false},
			{"report dated 5m arrives late", time.Minute, func(a Activity, _ time.Time) Activity { return a.Touch(start.Add(5 * time.Minute)) }, 40 * time.Minute, false},
		}},
		{"a job keeps it awake, its end restarts the clock", []step{
			{"started", 0, func(a Activity, t time.Time) Activity { return a.Touch(t) }, 30 * time.Minute, false},
			{"job starts at 10m", 10 * time.Minute, func(a Activity, _ time.Time) Activity { a.RunningJobs++; return a }, -1, false},
			{"5h later still running", 5 * time.Hour, nil, -1, false},
			{"job ends", 0, func(a Activity, t time.Time) Activity { a.RunningJobs--; return a.Touch(t) }, 5*time.Hour + 40*time.Minute, false},
			{"30m after the job", 30 * time.Minute, nil, 5*time.Hour + 40*time.Minute, true},
		}},
		{"a session keeps it awake", []step{
			{"started", 0, func(a Activity, t time.Time) Activity { return a.Touch(t) }, 30 * time.Minute, false},
			{"session opens", 29 * time.Minute, func(a Activity, _ time.Time) Activity { a.OpenSessions++; return a }, -1, false},
			{"an hour later", time.Hour, nil, -1, false},
			{"session closes", 0, func(a Activity, t time.Time) Activity { a.OpenSessions--; return a.Touch(t) }, time.Hour + 59*time.Minute, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := start
			var a Activity
			for _, s := range tc.steps {
				clock = clock.Add(s.advance)
				if s.change != nil {
					a = s.change(a, clock)
				}
				got, ok := Deadline(a, setting)
				switch {
				case s.want < 0 && ok:
					t.Fatalf("%s: Deadline = %s; want none", s.name, got)
				case s.want >= 0 && (!ok || !got.Equal(start.Add(s.want))):
					t.Fatalf("%s: Deadline = %s, %v; want %s", s.name, got, ok, start.Add(s.want))
				}
				if due := Due(a, setting, clock); due != s.due {
					t.Fatalf("%s: Due = %v; want %v", s.name, due, s.due)
				}
			}
		})
	}
}

func TestOnSettingChange(t *testing.T) {
	const never = time.Duration(0)
	for _, tc := range []struct {
		name         string
		a            Activity
		oldIdle      time.Duration
		newIdle      time.Duration
		reset        bool
		wantDeadline time.Time // zero means it cannot stop
	}{
		// DESIGN's example: idle 40m with 1h, shortened to 30m: stop at now+30m, not at once.
		{"shorten below the idle time resets", idleFor(40 * time.Minute), time.Hour, 30 * time.Minute, true, now.Add(30 * time.Minute)},
		{"shorten to exactly the idle time resets", idleFor(30 * time.Minute), time.Hour, 30 * time.Minute, true, now.Add(30 * time.Minute)},
		{"shorten above the idle time keeps the clock", idleFor(10 * time.Minute), time.Hour, 30 * time.Minute, false, now.Add(20 * time.Minute)},
		{"lengthen does not reset", idleFor(40 * time.Minute), time.Hour, 2 * time.Hour, false, now.Add(80 * time.Minute)},
		{"lengthen while past both settings does not reset", idleFor(3 * time.Hour), time.Hour, 2 * time.Hour, false, now.Add(-time.Hour)},
		{"same setting does not reset", idleFor(40 * time.Minute), 30 * time.Minute, 30 * time.Minute, false, now.Add(-10 * time.Minute)},
		{"null to a value below the idle time resets", idleFor(5 * time.Hour), never, 30 * time.Minute, true, now.Add(30 * time.Minute)},
		{"null to a value above the idle time keeps the clock", idleFor(10 * time.Minute), never, time.Hour, false, now.Add(50 * time.Minute)},
		{"value to null: never stops", idleFor(40 * time.Minute), time.Hour, never, false, time.Time{}},
		{"null to null", idleFor(40 * time.Minute), never, never, false, time.Time{}},
		{"busy instance is not reset", Activity{RunningJobs: 1, LastActivity: now.Add(-5 * time.Hour)}, time.Hour, 30 * time.Minute, false, time.Time{}},
		{"session open is not reset", Activity{OpenSessions: 1, LastActivity: now.Add(-5 * time.Hour)}, time.Hour, 30 * time.Minute, false, time.Time{}},
		{"zero LastActivity resets", Activity{}, time.Hour, 30 * time.Minute, true, now.Add(30 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := OnSettingChange(tc.a, tc.oldIdle, tc.newIdle, now)
			want := tc.a.LastActivity
			if tc.reset {
				want = now
			}
			if !got.Equal(want) {
				t.Fatalf("OnSettingChange = %s; want %s", got, want)
			}
			a := tc.a
			a.LastActivity = got
			deadline, ok := Deadline(a, tc.newIdle)
			if ok != !tc.wantDeadline.IsZero() || !deadline.Equal(tc.wantDeadline) {
				t.Fatalf("Deadline after the change = %s, %v; want %s", deadline, ok, tc.wantDeadline)
			}
			if tc.reset && Due(a, tc.newIdle, now) {
				t.Fatal("a reset instance is due at once")
			}
		})
	}
}

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const after = 15 * time.Minute
	// A job that ran an hour ended at t0+1h: touched in, the deadline counts from its end.
	afterLongJob := Activity{LastActivity: t0}.Touch(t0.Add(time.Hour))
	for _, tc := range []struct {
		name string
		a    Activity
		idle time.Duration
		now  time.Time
		want Decision
	}{
		{"idle, before the deadline", Activity{LastActivity: t0}, after, t0.Add(time.Minute), Decision{Deadline: t0.Add(after)}},
		{"idle, 1ns before", Activity{LastActivity: t0}, after, t0.Add(after - 1), Decision{Deadline: t0.Add(after)}},
		{"idle, at the deadline", Activity{LastActivity: t0}, after, t0.Add(after), Decision{Stop: true}},
		{"a running job", Activity{LastActivity: t0, RunningJobs: 1}, after, t0.Add(time.Hour), Decision{}},
		{"an open session", Activity{LastActivity: t0, OpenSessions: 1}, after, t0.Add(time.Hour), Decision{}},
		{"idle shutdown off", Activity{LastActivity: t0}, 0, t0.Add(time.Hour), Decision{}},
		{"after a job longer than the setting", afterLongJob, after, t0.Add(time.Hour + time.Second), Decision{Deadline: t0.Add(time.Hour + after)}},
		{"after a long job, at its deadline", afterLongJob, after, t0.Add(time.Hour + after), Decision{Stop: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.a, tc.idle, tc.now); got != tc.want {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}
