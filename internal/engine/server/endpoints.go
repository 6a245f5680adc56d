package server

import (
	"net/http"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func (s *Server) listEndpoints(w http.ResponseWriter, req *http.Request) error {
	list, err := s.opts.Engine.ListEndpoints(req.Context(), req.PathValue("workspace"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.EndpointList{Endpoints: nonNil(list)})
	return nil
}

func (s *Server) createEndpoint(w http.ResponseWriter, req *http.Request) error {
	var spec api.EndpointSpec
	if err := decode(req, &spec); err != nil {
		return err
	}
	ep, err := s.opts.Engine.CreateEndpoint(req.Context(), req.PathValue("workspace"), spec, req.Header.Get(api.IdempotencyKeyHeader))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, ep)
	return nil
}

func (s *Server) getEndpoint(w http.ResponseWriter, req *http.Request) error {
	ep, err := s.opts.Engine.GetEndpoint(req.Context(), req.PathValue("workspace"), req.PathValue("endpoint"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ep)
	return nil
}

func (s *Server) updateEndpoint(w http.ResponseWriter, req *http.Request) error {
	var upd api.EndpointUpdate
	if err := decode(req, &upd); err != nil {
		return err
	}
	ep, err := s.opts.Engine.UpdateEndpoint(req.Context(), req.PathValue("workspace"), req.PathValue("endpoint"), upd)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ep)
	return nil
}

func (s *Server) deleteEndpoint(w http.ResponseWriter, req *http.Request) error {
	if err := s.opts.Engine.DeleteEndpoint(req.Context(), req.PathValue("workspace"), req.PathValue("endpoint")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getEndpointKeys(w http.ResponseWriter, req *http.Request) error {
	keys, err := s.opts.Engine.GetEndpointKeys(req.Context(), req.PathValue("workspace"), req.PathValue("endpoint"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, keys)
	return nil
}

func (s *Server) regenerateEndpointKeys(w http.ResponseWriter, req *http.Request) error {
	var body api.RegenerateKeysRequest
	if err := decode(req, &body); err != nil {
		return err
	}
	keys, err := s.opts.Engine.RegenerateEndpointKeys(req.Context(), req.PathValue("workspace"), req.PathValue("endpoint"), body.KeyType)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, keys)
	return nil
}

func (s *Server) getEndpointToken(w http.ResponseWriter, req *http.Request) error {
	tok, err := s.opts.Engine.GetEndpointToken(req.Context(), req.PathValue("workspace"), req.PathValue("endpoint"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tok)
	return nil
}
