package server

import (
	"net/http"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func (s *Server) checkQuota(w http.ResponseWriter, req *http.Request) error {
	var check api.QuotaCheck
	if err := decode(req, &check); err != nil {
		return err
	}
	if err := s.opts.Engine.CheckQuota(req.Context(), req.PathValue("workspace"), check); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
