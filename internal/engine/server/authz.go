package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/auth"
)

// scope says where the workspace of a permission comes from.
type scope int

const (
	// noWorkspace: the permission concerns no workspace (Any, Admin).
	noWorkspace scope = iota
	// pathWorkspace: the route's {workspace}.
	pathWorkspace
	// bodyWorkspace: the "name" of the request's body (creating a workspace).
	bodyWorkspace
	// allWorkspaces: the operation spans every workspace.
	allWorkspaces
)

// perm is the permission of one route in Routes: a verb and where its workspace is.
type perm struct {
	verb  auth.Verb
	scope scope
}

// The permissions the route table uses.
var (
	anyToken   = perm{auth.Any, noWorkspace}
	read       = perm{auth.Read, pathWorkspace}
	write      = perm{auth.Write, pathWorkspace}
	writeNamed = perm{auth.Write, bodyWorkspace}
	readAll    = perm{auth.Read, allWorkspaces}
	admin      = perm{auth.Admin, noWorkspace}
)

// Permission names the route's permission as openapi.yaml's x-permission does.
func (r Route) Permission() string {
	switch r.need {
	case anyToken:
		return "any"
	case writeNamed:
		return "write-named"
	case readAll:
		return "read-all"
	}
	return string(r.need.verb)
}

// need resolves a route's permission for one request.
func (p perm) need(req *http.Request) auth.Need {
	n := auth.Need{Verb: p.verb}
	switch p.scope {
	case pathWorkspace:
		n.Workspace = req.PathValue("workspace")
	case allWorkspaces:
		n.Workspace = auth.AllWorkspaces
	case bodyWorkspace:
		n.Workspace = bodyName(req)
	}
	return n
}

// bodyName reads the "name" of a JSON body and puts the body back for the handler. A body
// without one asks for the permission on every workspace.
func bodyName(req *http.Request) string {
	raw, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	req.Body = io.NopCloser(bytes.NewReader(raw))
	var v struct {
		Name string `json:"name"`
	}
	if err != nil || json.Unmarshal(raw, &v) != nil || v.Name == "" {
		return auth.AllWorkspaces
	}
	return v.Name
}

// call is what the server knows of a request's caller; the handlers may name the object
// a change made for the audit log (target).
type call struct {
	id auth.Identity
	// quiet calls are not audited: an instance's processes reporting activity with the
	// instance's activity token.
	quiet  bool
	target string
}

type callKey struct{}

func callOf(req *http.Request) *call {
	if c, ok := req.Context().Value(callKey{}).(*call); ok {
		return c
	}
	return &call{id: auth.Local}
}

// authenticate finds who makes the request: the token file's token (an operator), a token
// of the store, or an instance's activity token on its activity route. An engine without a
// token (a Unix socket) serves everyone as an operator. An error means 401.
func (s *Server) authenticate(req *http.Request) (*call, *api.Error) {
	c, reason, err := s.identify(req)
	if err != nil && s.opts.Metrics != nil {
		s.opts.Metrics.AuthFailure(reason)
	}
	return c, err
}

// identify is authenticate without the count of failures, which it gives a reason.
func (s *Server) identify(req *http.Request) (*call, string, *api.Error) {
	if s.opts.Token == "" {
		return &call{id: auth.Local}, "", nil
	}
	bearer, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || bearer == "" {
		return nil, "missing", api.Errorf(api.CodeUnauthorized, "token", "missing token: set the provider's token (or MLCOMPUTE_TOKEN) to an API token of the engine")
	}
	if validBearer(req.Header.Get("Authorization"), s.opts.Token) {
		return &call{id: auth.Identity{Name: api.TokenFileName, Role: api.RoleOperator}}, "", nil
	}
	if s.opts.Tokens != nil {
		id, found, expired := s.opts.Tokens.Lookup(bearer)
		if found {
			return &call{id: id}, "", nil
		}
		if expired {
			err := api.Errorf(api.CodeUnauthorized, "token", "token %q has expired: ask an operator for a new one (mlcompute token create)", id.Name)
			s.audit(&call{id: id}, "", req, http.StatusUnauthorized, err)
			return nil, "expired", err
		}
	}
	if ws, ok := s.activityAllowed(req); ok {
		return &call{id: auth.Identity{Name: "activity", Role: api.RoleContributor, Workspaces: []string{ws}}, quiet: true}, "", nil
	}
	return nil, "unknown", api.Errorf(api.CodeUnauthorized, "token", "unknown or revoked token: set the provider's token (or MLCOMPUTE_TOKEN) to an API token of the engine")
}

func withCall(req *http.Request, c *call) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), callKey{}, c))
}

// audit appends an entry for a change, a job submit or a denied use. Reads that were
// allowed are not entries; neither are the calls of unknown tokens, which name no one
// (a brute force leaves no trace on disk).
func (s *Server) audit(c *call, action string, req *http.Request, status int, err error) {
	if s.opts.Audit == nil || c.quiet {
		return
	}
	e := api.AuditEntry{Time: s.clock.Now().UTC(), Token: c.id.Name, Action: action, Target: c.target, Status: status, Result: "allowed"}
	if e.Target == "" {
		e.Target = req.URL.Path
	}
	if e.Action == "" {
		e.Action = req.Method + " " + req.URL.Path
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Result = "denied"
	case status >= 400:
		e.Result = "failed"
	}
	if err != nil {
		e.Reason = err.Error()
	}
	if werr := s.opts.Audit.Append(e); werr != nil {
		s.log.Error("writing the audit log failed", "error", werr)
	}
}

// audited reports whether an allowed call of the route is an audit entry: every call
// that may change something, but for the quota check (a read sent as POST).
func (r Route) audited() bool {
	return r.Method != http.MethodGet && r.need.verb != auth.Read
}

func (s *Server) listTokens(w http.ResponseWriter, _ *http.Request) error {
	list := []api.Token{}
	if s.opts.Token != "" {
		list = append(list, api.Token{Name: api.TokenFileName, Role: api.RoleOperator, Workspaces: []string{}})
	}
	if s.opts.Tokens != nil {
		list = append(list, s.opts.Tokens.List()...)
	}
	writeJSON(w, http.StatusOK, api.TokenList{Tokens: list})
	return nil
}

func (s *Server) tokens() (*auth.Tokens, error) {
	if s.opts.Tokens == nil {
		return nil, api.Errorf(api.CodeInvalid, "", "this engine keeps no API tokens")
	}
	return s.opts.Tokens, nil
}

func (s *Server) createToken(w http.ResponseWriter, req *http.Request) error {
	tokens, err := s.tokens()
	if err != nil {
		return err
	}
	var spec api.TokenSpec
	if err := decode(req, &spec); err != nil {
		return err
	}
	c := callOf(req)
	c.target = "tokens/" + spec.Name
	created, err := tokens.Create(spec, c.id.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, created)
	return nil
}

func (s *Server) revokeToken(w http.ResponseWriter, req *http.Request) error {
	tokens, err := s.tokens()
	if err != nil {
		return err
	}
	if err := tokens.Revoke(req.PathValue("token")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) auditLog(w http.ResponseWriter, _ *http.Request) error {
	if s.opts.Audit == nil {
		return api.Errorf(api.CodeInvalid, "", "this engine keeps no audit log")
	}
	entries, err := s.opts.Audit.Entries()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.AuditList{Entries: nonNil(entries)})
	return nil
}
