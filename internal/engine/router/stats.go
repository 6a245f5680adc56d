package router

import "sync/atomic"

// DeploymentStats are the counters of one deployment since it was first set. Responses
// are counted by the status the client received; the router's own 429 and 504 answers are
// also in Responses4xx and Responses5xx.
type DeploymentStats struct {
	// Requests routed to the deployment (pinned or by traffic), mirror copies excluded.
	Requests uint64
	// Responses2xx, Responses4xx and Responses5xx count responses by status class.
	Responses2xx uint64
	Responses4xx uint64
	Responses5xx uint64
	// Rejected429 counts requests refused because every ready instance was full.
	Rejected429 uint64
	// Timeouts counts requests cancelled by the deployment's request timeout.
	Timeouts uint64
	// Retries counts requests retried on another instance after a connection failure.
	Retries uint64
	// ClientCanceled counts requests the client abandoned before the answer.
	ClientCanceled uint64
	// Mirrored counts mirror copies sent to this deployment; MirrorDropped the copies not
	// sent (every instance full, or the body too large); MirrorFailed the copies that got
	// a transport error or a 5xx.
	Mirrored      uint64
	MirrorDropped uint64
	MirrorFailed  uint64
	// InFlight is the number of requests (mirror copies included) the deployment's
	// instances are serving now.
	InFlight int64
	// MirrorInFlight is the number of mirror copies among InFlight. The autoscaler's load
	// leaves them out (DESIGN 4): a deployment that only receives copies never grows.
	// It is read apart from InFlight, so InFlight - MirrorInFlight may briefly be off by
	// the copies starting or ending at that moment.
	MirrorInFlight int64
	// Held is the number of requests held now, waiting for an instance (Deployment.Hold).
	Held int64
}

// counters are the live counters behind DeploymentStats.
type counters struct {
	requests, s2xx, s4xx, s5xx, rejected, timeouts, retries, canceled atomic.Uint64
	mirrored, mirrorDropped, mirrorFailed                             atomic.Uint64
	// mirrorInFlight counts the copies holding an instance slot now; it is raised after the
	// slot is taken and lowered before it is given back.
	mirrorInFlight atomic.Int64
}

// observe counts one response status.
func (c *counters) observe(status int) {
	switch {
	case status >= 500:
		c.s5xx.Add(1)
	case status >= 400:
		c.s4xx.Add(1)
	case status >= 200 && status < 300:
		c.s2xx.Add(1)
	}
}

func (c *counters) snapshot() DeploymentStats {
	return DeploymentStats{
		Requests:       c.requests.Load(),
		Responses2xx:   c.s2xx.Load(),
		Responses4xx:   c.s4xx.Load(),
		Responses5xx:   c.s5xx.Load(),
		Rejected429:    c.rejected.Load(),
		Timeouts:       c.timeouts.Load(),
		Retries:        c.retries.Load(),
		ClientCanceled: c.canceled.Load(),
		Mirrored:       c.mirrored.Load(),
		MirrorDropped:  c.mirrorDropped.Load(),
		MirrorFailed:   c.mirrorFailed.Load(),
		MirrorInFlight: c.mirrorInFlight.Load(),
	}
}
