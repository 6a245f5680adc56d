package router

import (
	"context"
	"errors"
	"net"
	"net/http"
)

// upstreamError answers a request that failed before a response: 504 after the request
// timeout, nothing useful when the client went away (or, with clientSide, when reading
// its body failed), 502 otherwise. w already carries the router's response headers.
func (r *Router) upstreamError(w http.ResponseWriter, ctx context.Context, a *attempt, err error, clientSide bool) {
	switch {
	case a.isTimedOut():
		a.status = http.StatusGatewayTimeout
		writeError(w, errTimeout(a.dep))
	case ctx.Err() != nil || a.over() || clientSide:
		// The client went away (or the server is shutting down): nobody reads this.
		a.status = 0
		a.dep.stats.canceled.Add(1)
		r.log.Debug("request canceled", "deployment", a.dep.name, "request_id", a.requestID, "error", err)
		writeError(w, &Error{Status: http.StatusBadGateway, Code: CodeBadGateway, Message: "request canceled"})
	default:
		a.status = http.StatusBadGateway
		r.log.Warn("instance failed", "deployment", a.dep.name, "instance", a.in.id,
			"request_id", a.requestID, "retried", a.retried, "error", err)
		writeError(w, errInstanceFailed(a.dep, a.in))
	}
}

// retryOn moves a, whose instance could not be connected to, to another ready instance
// of its deployment that has room and that usable accepts, once. It returns the new
// instance, or nil when there is none (or a already retried).
func (r *Router) retryOn(a *attempt, err error, usable func(*instance) bool) *instance {
	if a.retried {
		return nil
	}
	next := r.moveToAnother(a.dep, a.in, usable, a.requestID, err)
	if next != nil {
		a.in, a.retried = next, true
	}
	return next
}

// moveToAnother moves a request whose instance failed could not be connected to onto
// another ready instance of dep that has room and that usable (nil: any) accepts: it takes
// that instance's slot, releases failed's, and counts and logs the retry. It returns the
// new instance, or nil when there is none. Both server paths retry through it.
func (r *Router) moveToAnother(dep *deploymentState, failed *instance, usable func(*instance) bool, requestID string, err error) *instance {
	next := dep.acquire(failed)
	if next == nil {
		return nil
	}
	if usable != nil && !usable(next) {
		next.release()
		return nil
	}
	failed.release()
	dep.stats.retries.Add(1)
	r.log.Warn("instance unreachable, retrying on another", "deployment", dep.name,
		"instance", failed.id, "retry_instance", next.id, "request_id", requestID, "error", err)
	return next
}

// isDialError reports whether err happened while connecting, before any byte of the
// request was written.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
