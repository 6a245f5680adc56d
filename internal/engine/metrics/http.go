package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DeploymentHeader is the response header in which the scoring router names the deployment
// that served a request (router.DeploymentHeader; repeated here so this package does not
// depend on the router).
const DeploymentHeader = "azureml-model-deployment"

// Scoring wraps the scoring router: it records every request's endpoint, deployment,
// status code and latency. It reads only the request path and the response, so the router
// itself needs no change.
func (m *Metrics) Scoring(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := m.clock.Now()
		sw := &StatusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, req)
		deployment := sw.Header().Get(DeploymentHeader)
		endpoint := scoringEndpoint(req.URL.EscapedPath())
		// The router names a deployment on every request it routed. A 404 without one is a
		// path that names no endpoint (or no deployment of it): labelling it with whatever
		// the client sent would let anyone grow the label set without bound.
		if deployment == "" && sw.Status() == http.StatusNotFound {
			endpoint = ""
		}
		m.ObserveScoring(endpoint, deployment, sw.Status(), m.clock.Since(start))
	})
}

// ObserveScoring counts one scoring request the router answered itself, without the
// Scoring middleware: the scoring event loops (router.LoopServer) serve most requests.
func (m *Metrics) ObserveScoring(endpoint, deployment string, status int, elapsed time.Duration) {
	m.scoring.WithLabelValues(endpoint, deployment, strconv.Itoa(status)).Observe(elapsed.Seconds())
}

// scoringEndpoint is the first segment of a scoring path (/{endpoint}/score...).
func scoringEndpoint(path string) string {
	name, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return name
}

// StatusWriter remembers the status code written through it. It passes Flush through and
// unwraps for http.ResponseController (deadlines, hijacking for upgrades).
type StatusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the first final status code (informational 1xx codes other than
// 101 Switching Protocols come before the final one).
func (w *StatusWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush flushes the underlying writer when it can.
func (w *StatusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

// Unwrap returns the underlying writer.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Status is the code written, 200 if the handler wrote nothing (net/http's default).
func (w *StatusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
