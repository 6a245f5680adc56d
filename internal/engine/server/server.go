// Package server exposes the engine over the versioned HTTP JSON API. Handlers are thin:
// check, decode, call the engine, encode. Errors become status codes in one place (writeError).
package server

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/ui"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Options configure a server.
type Options struct {
	Engine *engine.Engine
	Logger hclog.Logger
	// Token, when set, must be presented as "Authorization: Bearer <token>" on every call.
	Token string
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
}

// Route is one API operation; Routes is the table both the mux and the OpenAPI test read.
type Route struct {
	Method  string
	Path    string
	handler func(*Server, http.ResponseWriter, *http.Request) error
}

// Routes lists every API operation.
var Routes = []Route{
	{"GET", "/v1/status", (*Server).status},
	{"POST", "/v1/shutdown", (*Server).shutdown},
	{"GET", "/v1/backup", (*Server).backup},
	{"GET", "/v1/workspaces", (*Server).listWorkspaces},
	{"POST", "/v1/workspaces", (*Server).createWorkspace},
	{"GET", "/v1/workspaces/{workspace}", (*Server).getWorkspace},
	{"PUT", "/v1/workspaces/{workspace}", (*Server).updateWorkspace},
	{"DELETE", "/v1/workspaces/{workspace}", (*Server).deleteWorkspace},
	{"GET", "/v1/workspaces/{workspace}/computes", (*Server).listComputes},
	{"POST", "/v1/workspaces/{workspace}/computes", (*Server).createCompute},
	{"GET", "/v1/workspaces/{workspace}/computes/{compute}", (*Server).getCompute},
	{"PUT", "/v1/workspaces/{workspace}/computes/{compute}", (*Server).updateCompute},
	{"DELETE", "/v1/workspaces/{workspace}/computes/{compute}", (*Server).deleteCompute},
	{"POST", "/v1/workspaces/{workspace}/computes/{compute}/start", instanceAction(api.ActionStart)},
	{"POST", "/v1/workspaces/{workspace}/computes/{compute}/stop", instanceAction(api.ActionStop)},
	{"POST", "/v1/workspaces/{workspace}/computes/{compute}/restart", instanceAction(api.ActionRestart)},
	{"POST", "/v1/workspaces/{workspace}/computes/{compute}/activity", (*Server).reportActivity},
	{"POST", "/v1/workspaces/{workspace}/computes/{compute}/exec", (*Server).exec},
	{"POST", "/v1/workspaces/{workspace}/quota:check", (*Server).checkQuota},
	{"GET", "/v1/workspaces/{workspace}/environments", (*Server).listEnvironments},
	{"POST", "/v1/workspaces/{workspace}/environments", (*Server).createEnvironment},
	{"GET", "/v1/workspaces/{workspace}/environments/{environment}", (*Server).getEnvironment},
	{"PUT", "/v1/workspaces/{workspace}/environments/{environment}", (*Server).updateEnvironment},
	{"DELETE", "/v1/workspaces/{workspace}/environments/{environment}", (*Server).deleteEnvironment},
	{"POST", "/v1/workspaces/{workspace}/snapshots", (*Server).putSnapshot},
	{"GET", "/v1/workspaces/{workspace}/jobs", (*Server).listJobs},
	{"POST", "/v1/workspaces/{workspace}/jobs", (*Server).submitJob},
	{"GET", "/v1/workspaces/{workspace}/jobs/{job}", (*Server).getJob},
	{"DELETE", "/v1/workspaces/{workspace}/jobs/{job}", (*Server).deleteJob},
	{"GET", "/v1/workspaces/{workspace}/jobs/{job}/outputs/{output}", (*Server).downloadJobOutput},
	{"POST", "/v1/workspaces/{workspace}/jobs/{job}/cancel", (*Server).cancelJob},
	{"POST", "/v1/workspaces/{workspace}/jobs/{job}/rerun", (*Server).rerunJob},
	{"GET", "/v1/workspaces/{workspace}/jobs/{job}/logs", (*Server).jobLogs},
	{"GET", "/v1/workspaces/{workspace}/onlineEndpoints", (*Server).listEndpoints},
	{"POST", "/v1/workspaces/{workspace}/onlineEndpoints", (*Server).createEndpoint},
	{"GET", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}", (*Server).getEndpoint},
	{"PUT", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}", (*Server).updateEndpoint},
	{"DELETE", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}", (*Server).deleteEndpoint},
	{"GET", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}/keys", (*Server).getEndpointKeys},
	{"POST", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}/regenerateKeys", (*Server).regenerateEndpointKeys},
	{"GET", "/v1/workspaces/{workspace}/onlineEndpoints/{endpoint}/token", (*Server).getEndpointToken},
	{"GET", "/v1/sizes", (*Server).listSizes},
	{"GET", "/v1/sizes/isolated", (*Server).listIsolatedSizes},
	{"POST", "/v1/ui/logins", (*Server).createUILogin},
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
			if m := s.opts.Metrics; m != nil {
				start := m.Now()
				sw := &metrics.StatusWriter{ResponseWriter: w}
				w = sw
				defer func() { m.ObserveAPI(r.Method, r.Path, sw.Status(), m.Since(start)) }()
			}
			if err := r.handler(s, w, req); err != nil {
				s.writeError(w, req, err)
			}
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
	if s.opts.Token != "" && !validBearer(req.Header.Get("Authorization"), s.opts.Token) && !s.activityAllowed(req) {
		s.writeError(w, req, api.Errorf(api.CodeUnauthorized, "token", "missing or wrong token: set the provider's token (or MLCOMPUTE_TOKEN) to the engine's token"))
		return
	}
	if err := validation.IdempotencyKey(req.Header.Get(api.IdempotencyKeyHeader)); err != nil {
		s.writeError(w, req, err)
		return
	}
	s.mux.ServeHTTP(w, req)
}

// activityAllowed reports whether req reports activity on a compute instance with that
// instance's activity token, the one token besides the API's that the server takes: the
// engine gives it to the processes on the instance's node, and it allows only this call.
func (s *Server) activityAllowed(req *http.Request) bool {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || req.Method != http.MethodPost {
		return false
	}
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/"), "/")
	// v1 workspaces {workspace} computes {compute} activity
	if len(parts) != 6 || parts[0] != "v1" || parts[1] != "workspaces" || parts[3] != "computes" || parts[5] != "activity" {
		return false
	}
	return s.opts.Engine != nil && s.opts.Engine.ActivityTokenValid(parts[2], parts[4], token)
}

func validBearer(header, token string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
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
func (s *Server) backup(w http.ResponseWriter, _ *http.Request) error {
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

func (s *Server) listWorkspaces(w http.ResponseWriter, req *http.Request) error {
	list, err := s.opts.Engine.ListWorkspaces(req.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.WorkspaceList{Workspaces: nonNil(list)})
	return nil
}

func (s *Server) createWorkspace(w http.ResponseWriter, req *http.Request) error {
	var spec api.WorkspaceSpec
	if err := decode(req, &spec); err != nil {
		return err
	}
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
