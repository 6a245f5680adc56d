// Package jobtimeout decides when a running job has outlived its limits.timeout. It is
// pure: the caller passes the job's start, its limit and now.
//
// The limit counts from when the job's command started on its nodes (the job became
// Running), not from its submission: the time a job waits for nodes, or for its
// environment to be built, is not the job's own, as in Azure Machine Learning's
// limits.timeout. A job without a limit, or not running, never times out.
package jobtimeout

import (
	"fmt"
	"time"
)

// MaxSeconds bounds a limit (a year), so the deadline never overflows.
const MaxSeconds = 365 * 24 * 3600

// Decision is what to do about one job's limit now.
type Decision struct {
	// Expired: the job ran for its whole limit; it fails with Reason.
	Expired bool
	Reason  string
	// Deadline is when it expires, for the caller's timer (zero when it has no limit or
	// is not running).
	Deadline time.Time
}

// Decide returns whether a job that started at startedAt (nil: not running) with a limit
// of limitSeconds (0: none) has expired at now.
func Decide(startedAt *time.Time, limitSeconds int64, now time.Time) Decision {
	if startedAt == nil || limitSeconds <= 0 {
		return Decision{}
	}
	limit := time.Duration(min(limitSeconds, MaxSeconds)) * time.Second
	d := Decision{Deadline: startedAt.Add(limit)}
	if !now.Before(d.Deadline) {
		d.Expired = true
		d.Reason = fmt.Sprintf("the job ran for its limits.timeout of %s and was stopped", limit)
	}
	return d
}
