package router

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// ErrorCode is the stable, machine-readable reason of a response the router made itself.
// The codes it shares with the engine API (unauthorized, not_found, unavailable) mean the
// same thing there.
type ErrorCode string

const (
	// CodeUnauthorized: the credential is missing or wrong (401).
	CodeUnauthorized ErrorCode = "unauthorized"
	// CodeNotFound: no such endpoint, scoring path or pinned deployment (404).
	CodeNotFound ErrorCode = "not_found"
	// CodeTooManyRequests: every ready instance is at its concurrency limit (429).
	CodeTooManyRequests ErrorCode = "too_many_requests"
	// CodeUnavailable: no deployment receives traffic, or the deployment has no ready
	// instance (503).
	CodeUnavailable ErrorCode = "unavailable"
	// CodeTimeout: the deployment did not answer within its request timeout (504).
	CodeTimeout ErrorCode = "timeout"
	// CodeBadGateway: the instance could not be reached or failed mid-request (502).
	CodeBadGateway ErrorCode = "bad_gateway"
)

// Error is the body of every response the router makes itself instead of a deployment.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	// Deployments lists the endpoint's deployments when a pinned one does not exist.
	Deployments []string `json:"deployments,omitempty"`
	// Status is the HTTP status the error travels with.
	Status int `json:"-"`
}

func (e *Error) Error() string { return e.Message }

// ErrorBody is the JSON envelope of an error response, the same as the engine API's.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// IsCode reports whether err is, or wraps, a router Error with the given code.
func IsCode(err error, code ErrorCode) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// errRequestTimeout is the cancellation cause of a request that ran past its deployment's
// request timeout.
var errRequestTimeout = errors.New("request timeout exceeded")

// errRequestEnded fails upstream work of a request that already timed out or was
// abandoned by its client.
var errRequestEnded = errors.New("request ended before it was forwarded")

// The errors the router answers with once it chose a deployment, whichever server path
// serves the request.

func errNoTraffic(endpoint string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
		Message: fmt.Sprintf("no deployment receives traffic in endpoint %q; set its traffic or pin a deployment with the %s header", endpoint, DeploymentHeader)}
}

func errNoReadyInstance(dep *deploymentState) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
		Message: fmt.Sprintf("deployment %q has no ready instance", dep.name)}
}

func errBusy(dep *deploymentState) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: CodeTooManyRequests,
		Message: fmt.Sprintf("deployment %q is busy: every ready instance is serving its max_concurrent_requests_per_instance (%d)", dep.name, dep.max)}
}

func errTimeout(dep *deploymentState) *Error {
	return &Error{Status: http.StatusGatewayTimeout, Code: CodeTimeout,
		Message: fmt.Sprintf("deployment %q did not answer within its request timeout of %s", dep.name, dep.timeout)}
}

func errInstanceFailed(dep *deploymentState, in *instance) *Error {
	return &Error{Status: http.StatusBadGateway, Code: CodeBadGateway,
		Message: fmt.Sprintf("deployment %q: instance %q failed to answer", dep.name, in.id)}
}

// errorBody is e's JSON envelope, newline-terminated.
func errorBody(e *Error) []byte {
	body, err := json.Marshal(ErrorBody{Error: e})
	if err != nil { // cannot happen for this type; keep the status regardless
		body = []byte(`{"error":{"code":"internal","message":"encoding error"}}`)
	}
	return append(body, '\n')
}

// writeError writes e as the JSON response. Headers already set on w (X-Request-Id,
// azureml-model-deployment) are kept.
func writeError(w http.ResponseWriter, e *Error) {
	body := errorBody(e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}
