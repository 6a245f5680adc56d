// Package server exposes the engine over the versioned HTTP JSON API. Handlers are thin:
// check, decode, call the engine, encode. Errors become status codes in one place (writeError).
package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/auth"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/ui"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Options configure a server.
type Options struct {
	Engine *engine.Engine
	Logger hclog.Logger
	// Token, when set, turns authentication on: every call must present a token as
	// "Authorization: Bearer <token>", this one (the token file's, an operator on every
	// workspace) or one of Tokens. Unset, every caller is an operator (a Unix socket,
	// whose file mode is the access control).
	Token string
	// Tokens are the engine's API tokens with their roles (nil: only Token).
	Tokens *auth.Tokens
	// Audit, when set, receives every change, job submit and denied token use.
	Audit *auth.AuditLog
	// OnRequest is called at the start of every API call (the daemon's idle timer). Scrapes
	// of /metrics and the status page's requests are not API calls: watching an engine does
	// not keep it up.
	OnRequest func()
	// Shutdown is called by POST /v1/shutdown after the response is written.
	Shutdown func()
	// Metrics, when set, is served on GET /metrics and times every API call.
	Metrics *metrics.Metrics
	// Clock times login codes and sessions of the status page; the real clock when nil.
	Clock clock.PassiveClock
	// Snapshots, when set, stores uploaded code snapshots (the engine's own store), so
	// that the API can tell a bad archive (400) from a fault of this machine's disk (500).
	// Unset, uploads go through the engine.
	Snapshots *snapshot.Store
	// Backup, when set, serves GET /v1/backup: a consistent copy of the engine's store
	// (store.Store.Backup).
	Backup func(fn func(size int64, copyTo func(io.Writer) (int64, error)) error) error
	// BackupArchive, when set, serves GET /v1/backup?artifacts=true: the store's copy and
	// the artifacts it references, as one tar archive laid out as the data dir
	// (jobs.Controller.Backup).
	BackupArchive func(ctx context.Context, w io.Writer) error
}

// Route is one API operation; Routes is the table both the mux and the OpenAPI test read.
type Route struct {
	Method string
	Path   string
	// need is the permission the operation needs (authorize).
	need    perm
	handler func(*Server, http.ResponseWriter, *http.Request) error
}

// Routes lists every API operation.
var Routes = []Route{
	{"GET", "/v1/status", anyToken, (*Server).status},
	{"POST", "/v1/shutdown", admin, (*Server).shutdown},
	{"GET", "/v1/backup", admin, (*Server).backup},
	{"GET", "/v1/workspaces", anyToken, (*Server).listWorkspaces},
	{"POST", "/v1/workspaces", writeNamed, (*Server).createWorkspace},
	{"GET", "/v1/workspaces/{workspace}", read, (*Server).getWorkspace},
	{"PUT", "/v1/workspaces/{workspace}", write, (*Server).updateWorkspace},
	{"DELETE", "/v1/workspaces/{workspace}", write, (*Server).deleteWorkspace},
	{"GET", "/v1/workspaces/{workspace}/computes", read, (*Server).listComputes},
	{"POST", "/v1/workspaces/{workspace}/computes", write, (*Server).createCompute},
	{"GET", "/v1/workspaces/{workspace}/computes/{compute}", read, (*Server).getCompute},
	{"PUT", "/v1/workspaces/{workspace}/computes/{compute}", write, (*Server).updateCompute},
	{"DELETE", "/v1/workspaces/{workspace}/computes/{compute}", write, (*Server).deleteCompute},
	{"POST", "/v1/workspaces/{workspace}/computes/{compute}/start", write, instanceAction(api.ActionStart)},
	{"POST", "/v1/workspaces/{workspace}/computes/{compute}/stop", write, instanceAction(api.ActionStop)},
	{"POST", "/v1/workspaces/{workspace}/computes/{compute}/restart", write, instanceAction(api.ActionRestart)},
	{"POST", "/v1/workspaces/{workspace}/computes/{compute}/activity", write, (*Server).reportActivity},
	{"POST", "/v1/workspaces/{workspace}/computes/{compute}/exec", write, (*Server).exec},
	{"POST", "/v1/workspaces/{workspace}/quota:check", read, (*Server).checkQuota},
	{"GET", "/v1/workspaces/{workspace}/environments", read, (*Server).listEnvironments},
	{"POST", "/v1/workspaces/{workspace}/environments", write, (*Server).createEnvironment},
	{"GET", "/v1/workspaces/{workspace}/environments/{environment}", read, (*Server).getEnvironment},
	{"PUT", "/v1/workspaces/{workspace}/environments/{environment}", write, (*Server).updateEnvironment},
	{"DELETE", "/v1/workspaces/{workspace}/environments/{environment}", write, (*Server).deleteEnvironment},
	{"GET", "/v1/workspaces/{workspace}/schedules", read, (*Server).listSchedules},
	{"POST", "/v1/workspaces/{workspace}/schedules", write, (*Server).createSchedule},
	{"GET", "/v1/workspaces/{workspace}/schedules/{schedule}", read, (*Server).getSchedule},
	{"PUT", "/v1/workspaces/{workspace}/schedules/{schedule}", write, (*Server).updateSchedule},
	{"DELETE", "/v1/workspaces/{workspace}/schedules/{schedule}", write, (*Server).deleteSchedule},
	{"POST", "/v1/workspaces/{workspace}/snapshots", write, (*Server).putSnapshot},
	{"GET", "/v1/workspaces/{workspace}/jobs", read, (*Server).listJobs},
	{"POST", "/v1/workspaces/{workspace}/jobs", write, (*Server).submitJob},
	{"GET", "/v1/workspaces/{workspace}/jobs/{job}", read, (*Server).getJob},
	{"DELETE", "/v1/workspaces/{workspace}/jobs/{job}", write, (*Server).deleteJob},
	{"GET", "/v1/workspaces/{workspace}/jobs/{job}/outputs/{output}", read, (*Server).downloadJobOutput},
	{"GET", "/v1/workspaces/{workspace}/jobs/{job}/outputs/{output}/metadata", read, (*Server).getJobOutput},
	{"POST", "/v1/workspaces/{workspace}/jobs/{job}/cancel", write, (*Server).cancelJob},
	{"POST", "/v1/workspaces/{workspace}/jobs/{job}/rerun", write, (*Server).rerunJob},
	{"GET", "/v1/workspaces/{workspace}/jobs/{job}/logs", read, (*Server).jobLogs},
	{"GET", "/v1/workspaces/{workspace}/history", read, (*Server).history},
	{"GET", "/v1/workspaces/{workspace}/onlineEndpoints", read, (*Server).listEndpoints},
	{"POST", "/v1/workspaces/{workspace}/onlineEndpoints", write, (*Server).createEndpoint},
	{"GET", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}", read, (*Server).getEndpoint},
	{"PUT", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}", write, (*Server).updateEndpoint},
	{"DELETE", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}", write, (*Server).deleteEndpoint},
	{"GET", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}/keys", write, (*Server).getEndpointKeys},
	{"POST", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}/regenerateKeys", write, (*Server).regenerateEndpointKeys},
	{"GET", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}/token", write, (*Server).getEndpointToken},
	{"GET", "/v1/sizes", anyToken, (*Server).listSizes},
	{"GET", "/v1/sizes/isolated", anyToken, (*Server).listIsolatedSizes},
	{"POST", "/v1/ui/logins", readAll, (*Server).createUILogin},
	{"GET", "/v1/tokens", admin, (*Server).listTokens},
	{"POST", "/v1/tokens", admin, (*Server).createToken},
	{"DELETE", "/v1/tokens/{token}", admin, (*Server).revokeToken},
	{"GET", "/v1/audit", admin, (*Server).auditLog},
}

// Server is an http.Handler serving the API.
type Server struct {
	opts    Options
	log     hclog.Logger
	mux     *http.ServeMux
	clock   clock.PassiveClock
	ui      *uiAuth
	uiState *ui.Builder
}

// New builds a server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	s := &Server{
		opts: opts, log: opts.Logger.Named("api"), mux: http.NewServeMux(), clock: opts.Clock,
		ui: newUIAuth(), uiState: ui.NewBuilder(opts.Engine),
	}
	for _, r := range Routes {
		s.mux.HandleFunc(r.Method+" "+r.Path, func(w http.ResponseWriter, req *http.Request) {
			sw := &metrics.StatusWriter{ResponseWriter: w}
			w = sw
			if m := s.opts.Metrics; m != nil {
				start := m.Now()
				defer func() { m.ObserveAPI(r.Method, r.Path, sw.Status(), m.Since(start)) }()
			}
			s.serveRoute(r, w, req, sw)
		})
	}
	if opts.Metrics != nil {
		s.mux.Handle("GET /metrics", opts.Metrics.Handler())
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, api.Errorf(api.CodeNotFound, "", "no API operation %s %s", req.Method, req.URL.Path))
	})
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if isUIPath(req.URL.Path) {
		s.serveUI(w, req)
		return
	}
	if s.opts.OnRequest != nil && req.URL.Path != "/metrics" {
		s.opts.OnRequest()
	}
	c, authErr := s.authenticate(req)
	if authErr != nil {
		s.writeError(w, req, authErr)
		return
	}
	req = withCall(req, c)
	if err := validation.IdempotencyKey(req.Header.Get(api.IdempotencyKeyHeader)); err != nil {
		s.writeError(w, req, err)
		return
	}
	s.mux.ServeHTTP(w, req)
}

// serveRoute runs one API operation: the permission check of its route (403 naming the
// permission a token lacks), the handler, and the audit entry of a change or a denial.
func (s *Server) serveRoute(r Route, w http.ResponseWriter, req *http.Request, sw *metrics.StatusWriter) {
	c := callOf(req)
	action := r.Method + " " + r.Path
	if need := r.need.need(req); !c.id.Allows(need) {
		err := c.id.Denied(need)
		s.writeError(w, req, err)
		s.audit(c, action, req, http.StatusForbidden, err)
		return
	}
	err := r.handler(s, w, req)
	if err != nil {
		s.writeError(w, req, err)
	}
	if r.audited() {
		s.audit(c, action, req, sw.Status(), err)
	}
}

// activityAllowed reports whether req reports activity on a compute instance with that
// instance's activity token, the one token besides the API's that the server takes: the
// engine gives it to the processes on the instance's node, and it allows only this call.
// It returns the instance's workspace.
func (s *Server) activityAllowed(req *http.Request) (string, bool) {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || req.Method != http.MethodPost {
		return "", false
	}
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/"), "/")
	// v1 workspaces {workspace} computes {compute} activity
	if len(parts) != 6 || parts[0] != "v1" || parts[1] != "workspaces" || parts[3] != "computes" || parts[5] != "activity" {
		return "", false
	}
	return parts[2], s.opts.Engine != nil && s.opts.Engine.ActivityTokenValid(parts[2], parts[4], token)
}

// validBearer compares digests, so that neither the time nor the length of the
// comparison depends on how much of the token a caller guessed.
func validBearer(header, token string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(token))
	return ok && subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func (s *Server) writeError(w http.ResponseWriter, req *http.Request, err error) {
	var apiErr *api.Error
	if !errors.As(err, &apiErr) {
		s.log.Error("request failed", "method", req.Method, "path", req.URL.Path, "error", err)
		apiErr = api.Errorf(api.CodeInternal, "", "internal error: %v", err)
	}
	writeJSON(w, apiErr.Code.HTTPStatus(), api.ErrorBody{Error: apiErr})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, s.opts.Engine.Status())
	return nil
}

func (s *Server) shutdown(w http.ResponseWriter, _ *http.Request) error {
	if s.opts.Shutdown == nil {
		return api.Errorf(api.CodeInvalid, "", "this engine cannot be shut down over the API")
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "shutting down"})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	go s.opts.Shutdown()
	return nil
}

// backup streams a consistent copy of the store (application/octet-stream, with its
// Content-Length). A failure after the first byte aborts the connection, so the client
// sees a short body rather than a damaged copy that looks whole.
func (s *Server) backup(w http.ResponseWriter, req *http.Request) error {
	withArtifacts, err := boolParam(req, "artifacts")
	if err != nil {
		return err
	}
	if withArtifacts {
		return s.backupArchive(w, req)
	}
	if s.opts.Backup == nil {
		return api.Errorf(api.CodeInvalid, "", "this engine cannot make backups over the API")
	}
	return s.opts.Backup(func(size int64, copyTo func(io.Writer) (int64, error)) error {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
		if _, err := copyTo(w); err != nil {
			s.log.Error("backup failed", "error", err)
			panic(http.ErrAbortHandler)
		}
		return nil
	})
}

// backupArchive streams the store's copy and the artifacts it references as a tar
// archive (application/x-tar, no length: the archive's end marks a whole one). An error
// before the first byte is an API error; after it, the connection is aborted.
func (s *Server) backupArchive(w http.ResponseWriter, req *http.Request) error {
	if s.opts.BackupArchive == nil {
		return api.Errorf(api.CodeInvalid, "artifacts", "this engine cannot make backups with artifacts over the API")
	}
	sw := &startedWriter{w: w}
	err := s.opts.BackupArchive(req.Context(), sw)
	if err != nil && !sw.started {
		return err
	}
	if err != nil {
		s.log.Error("backup failed", "error", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// startedWriter sends the tar archive's headers with its first byte.
type startedWriter struct {
	w       http.ResponseWriter
	started bool
}

func (sw *startedWriter) Write(p []byte) (int, error) {
	if !sw.started {
		sw.started = true
		sw.w.Header().Set("Content-Type", "application/x-tar")
		sw.w.WriteHeader(http.StatusOK)
	}
	return sw.w.Write(p)
}

func (s *Server) listWorkspaces(w http.ResponseWriter, req *http.Request) error {
	list, err := s.opts.Engine.ListWorkspaces(req.Context())
	if err != nil {
		return err
	}
	// A token scoped to workspaces sees only those.
	id := callOf(req).id
	list = slices.DeleteFunc(list, func(ws api.Workspace) bool { return !id.InWorkspace(ws.Name) })
	writeJSON(w, http.StatusOK, api.WorkspaceList{Workspaces: nonNil(list)})
	return nil
}

func (s *Server) createWorkspace(w http.ResponseWriter, req *http.Request) error {
	var spec api.WorkspaceSpec
	if err := decode(req, &spec); err != nil {
		return err
	}
	callOf(req).target = "/v1/workspaces/" + spec.Name
	ws, err := s.opts.Engine.CreateWorkspace(req.Context(), spec, req.Header.Get(api.IdempotencyKeyHeader))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, ws)
	return nil
}

func (s *Server) getWorkspace(w http.ResponseWriter, req *http.Request) error {
	ws, err := s.opts.Engine.GetWorkspace(req.Context(), req.PathValue("workspace"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ws)
	return nil
}

func (s *Server) updateWorkspace(w http.ResponseWriter, req *http.Request) error {
	var upd api.WorkspaceUpdate
	if err := decode(req, &upd); err != nil {
		return err
	}
	ws, err := s.opts.Engine.UpdateWorkspace(req.Context(), req.PathValue("workspace"), upd)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ws)
	return nil
}

func (s *Server) deleteWorkspace(w http.ResponseWriter, req *http.Request) error {
	force, err := boolParam(req, "force")
	if err != nil {
		return err
	}
	if err := s.opts.Engine.DeleteWorkspace(req.Context(), req.PathValue("workspace"), force); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listSizes(w http.ResponseWriter, req *http.Request) error {
	f, err := api.DecodeSizeFilter(req.URL.Query())
	if err != nil {
		return err
	}
	if err := validation.SizeFilter(f); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.SizeList{Sizes: nonNil(s.opts.Engine.Sizes(f))})
	return nil
}

func (s *Server) listIsolatedSizes(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, api.SizeList{Sizes: nonNil(s.opts.Engine.IsolatedSizes())})
	return nil
}

func boolParam(req *http.Request, name string) (bool, error) {
	v := req.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, api.Errorf(api.CodeInvalid, name, "%s must be true or false, got %q", name, v)
	}
	return b, nil
}

// nonNil makes empty lists encode as [] rather than null.
func nonNil[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}
