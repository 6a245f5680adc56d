package idle

import "time"

// Activity is what the engine stores about an instance's use.
type Activity struct {
	RunningJobs  int
	OpenSessions int
	// LastActivity is the last job end, session close, start of the instance, or activity
	// reported through the API.
	LastActivity time.Time
}

// Busy reports whether a job or a session keeps the instance awake whatever the time.
func (a Activity) Busy() bool {
	return a.RunningJobs > 0 || a.OpenSessions > 0
}

// Touch records activity at t and returns the result: LastActivity becomes the later of the
// two, so reports that arrive late or out of order never move the idle clock back.
func (a Activity) Touch(t time.Time) Activity {
	if t.After(a.LastActivity) {
		a.LastActivity = t
	}
	return a
}

// Deadline returns when the instance becomes idle enough to stop, and whether it can stop at
// all (no running jobs, no open sessions, a non-zero idle setting).
func Deadline(a Activity, idleAfter time.Duration) (time.Time, bool) {
	if a.Busy() || idleAfter <= 0 {
		return time.Time{}, false
	}
	return a.LastActivity.Add(idleAfter), true
}

// Due reports whether the instance should stop at now: it can stop and now has reached its
// deadline.
func Due(a Activity, idleAfter time.Duration, now time.Time) bool {
	deadline, ok := Deadline(a, idleAfter)
	return ok && !now.Before(deadline)
}

// OnSettingChange implements DESIGN's reset rule: shortening the setting to or below the
// current idle time resets the idle clock to 0 (as Azure does); it returns the new
// LastActivity, which is now after a reset and a.LastActivity otherwise. A zero setting
// means never, so going from zero to a value is a shortening. See the package documentation.
func OnSettingChange(a Activity, oldIdle, newIdle time.Duration, now time.Time) time.Time {
	shortened := newIdle > 0 && (oldIdle <= 0 || newIdle < oldIdle)
	if shortened && !a.Busy() && now.Sub(a.LastActivity) >= newIdle {
		return now
	}
	return a.LastActivity
}

// Decision is what an instance's idle rule says at one pass.
type Decision struct {
	// Stop: the instance has been idle for its setting; stop it (trigger IdleShutdown).
	Stop bool
	// Deadline is when it will be, for the timer queue; zero when it cannot stop (busy, or
	// idle shutdown off) or Stop is already set.
	Deadline time.Time
}

// Decide applies rules 1 to 4 at now to a running instance: stop now, wait for a deadline,
// or neither. The caller passes the activity as of now (a job that ended is already
// Touched in, a job that just started counts as running).
func Decide(a Activity, idleAfter time.Duration, now time.Time) Decision {
	deadline, ok := Deadline(a, idleAfter)
	switch {
	case !ok:
		return Decision{}
	case !now.Before(deadline):
		return Decision{Stop: true}
	default:
		return Decision{Deadline: deadline}
	}
}
