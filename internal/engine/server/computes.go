package server

import (
	"net/http"
	"strconv"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func (s *Server) listComputes(w http.ResponseWriter, req *http.Request) error {
	list, err := s.opts.Engine.ListComputes(req.Context(), req.PathValue("workspace"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.ComputeList{Computes: nonNil(list)})
	return nil
}

func (s *Server) createCompute(w http.ResponseWriter, req *http.Request) error {
	var spec api.ComputeSpec
	if err := decode(req, &spec); err != nil {
		return err
	}
	c, err := s.opts.Engine.CreateCompute(req.Context(), req.PathValue("workspace"), spec, req.Header.Get(api.IdempotencyKeyHeader))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, c)
	return nil
}

func (s *Server) getCompute(w http.ResponseWriter, req *http.Request) error {
	c, err := s.opts.Engine.GetCompute(req.Context(), req.PathValue("workspace"), req.PathValue("compute"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) updateCompute(w http.ResponseWriter, req *http.Request) error {
	var upd api.ComputeUpdate
	if err := decode(req, &upd); err != nil {
		return err
	}
	c, err := s.opts.Engine.UpdateCompute(req.Context(), req.PathValue("workspace"), req.PathValue("compute"), upd)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) deleteCompute(w http.ResponseWriter, req *http.Request) error {
	if err := s.opts.Engine.DeleteCompute(req.Context(), req.PathValue("workspace"), req.PathValue("compute")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) putSnapshot(w http.ResponseWriter, req *http.Request) error {
	if _, err := s.opts.Engine.GetWorkspace(req.Context(), req.PathValue("workspace")); err != nil {
		return err
	}
	id, err := s.opts.Engine.PutSnapshot(http.MaxBytesReader(w, req.Body, 320<<20))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, api.SnapshotRef{ID: id})
	return nil
}

func (s *Server) listJobs(w http.ResponseWriter, req *http.Request) error {
	list, err := s.opts.Engine.ListJobs(req.Context(), req.PathValue("workspace"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.JobList{Jobs: nonNil(list)})
	return nil
}

func (s *Server) submitJob(w http.ResponseWriter, req *http.Request) error {
	var spec api.JobSpec
	if err := decode(req, &spec); err != nil {
		return err
	}
	j, err := s.opts.Engine.SubmitJob(req.Context(), req.PathValue("workspace"), spec, req.Header.Get(api.IdempotencyKeyHeader))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, j)
	return nil
}

func (s *Server) getJob(w http.ResponseWriter, req *http.Request) error {
	j, err := s.opts.Engine.GetJob(req.Context(), req.PathValue("workspace"), req.PathValue("job"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

func (s *Server) cancelJob(w http.ResponseWriter, req *http.Request) error {
	j, err := s.opts.Engine.CancelJob(req.Context(), req.PathValue("workspace"), req.PathValue("job"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

func (s *Server) jobLogs(w http.ResponseWriter, req *http.Request) error {
	rank, err := queryInt(req, "rank")
	if err != nil {
		return err
	}
	offset, err := queryInt(req, "offset")
	if err != nil {
		return err
	}
	data, next, complete, err := s.opts.Engine.JobLogs(req.Context(), req.PathValue("workspace"), req.PathValue("job"), int(rank), offset)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.LogChunk{Data: data, NextOffset: next, Complete: complete})
	return nil
}

func queryInt(req *http.Request, name string) (int64, error) {
	v := req.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, api.Errorf(api.CodeInvalid, name, "%s must be an integer, got %q", name, v)
	}
	return n, nil
}

// instanceAction serves POST .../computes/{compute}/start, /stop and /restart.
func instanceAction(action string) func(*Server, http.ResponseWriter, *http.Request) error {
	return func(s *Server, w http.ResponseWriter, req *http.Request) error {
		c, err := s.opts.Engine.InstanceAction(req.Context(), req.PathValue("workspace"), req.PathValue("compute"), action)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, c)
		return nil
	}
}

func (s *Server) reportActivity(w http.ResponseWriter, req *http.Request) error {
	if err := s.opts.Engine.ReportActivity(req.Context(), req.PathValue("workspace"), req.PathValue("compute")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
