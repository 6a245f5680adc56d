package server

import (
	"net/http"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func (s *Server) listEnvironments(w http.ResponseWriter, req *http.Request) error {
	list, err := s.opts.Engine.ListEnvironments(req.Context(), req.PathValue("workspace"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.EnvironmentList{Environments: nonNil(list)})
	return nil
}

func (s *Server) createEnvironment(w http.ResponseWriter, req *http.Request) error {
	var spec api.EnvironmentSpec
	if err := decode(req, &spec); err != nil {
		return err
	}
	env, err := s.opts.Engine.CreateEnvironment(req.Context(), req.PathValue("workspace"), spec, req.Header.Get(api.IdempotencyKeyHeader))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, env)
	return nil
}

func (s *Server) getEnvironment(w http.ResponseWriter, req *http.Request) error {
	env, err := s.opts.Engine.GetEnvironment(req.Context(), req.PathValue("workspace"), req.PathValue("environment"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, env)
	return nil
}

func (s *Server) updateEnvironment(w http.ResponseWriter, req *http.Request) error {
	var upd api.EnvironmentUpdate
	if err := decode(req, &upd); err != nil {
		return err
	}
	env, err := s.opts.Engine.UpdateEnvironment(req.Context(), req.PathValue("workspace"), req.PathValue("environment"), upd)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, env)
	return nil
}

func (s *Server) deleteEnvironment(w http.ResponseWriter, req *http.Request) error {
	if err := s.opts.Engine.DeleteEnvironment(req.Context(), req.PathValue("workspace"), req.PathValue("environment")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
