// Package backoff is the engine's one rule for waiting after failures: a node creation
// that failed (per compute) and an endpoint instance that failed to start or died (per
// instance) wait before the next try, doubling with each failure in a row, at most Max.
package backoff

import "time"

// Max caps every wait after failures.
const Max = 5 * time.Minute

// Next is the wait after one more failure when the previous wait was prev (zero for the
// first failure): first, then doubling, at most Max, and never under floor (a permanent
// refusal waits at least that long, so a refusing cluster manager is not asked again and
// again).
func Next(prev, first, floor time.Duration) time.Duration {
	return min(max(2*prev, first, floor), Max)
}

// After is the wait when failures failures were counted in a row: base doubled once per
// failure, at most Max.
func After(failures int64, base time.Duration) time.Duration {
	d := base
	for i := int64(0); i < failures && d < Max; i++ {
		d *= 2
	}
	return min(d, Max)
}
