package server

import (
	"net/http"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func (s *Server) listSchedules(w http.ResponseWriter, req *http.Request) error {
	list, err := s.opts.Engine.ListSchedules(req.Context(), req.PathValue("workspace"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.JobScheduleList{Schedules: nonNil(list)})
	return nil
}

func (s *Server) createSchedule(w http.ResponseWriter, req *http.Request) error {
	var spec api.JobScheduleSpec
	if err := decode(req, &spec); err != nil {
		return err
	}
	sch, err := s.opts.Engine.CreateSchedule(req.Context(), req.PathValue("workspace"), spec, req.Header.Get(api.IdempotencyKeyHeader))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sch)
	return nil
}

func (s *Server) getSchedule(w http.ResponseWriter, req *http.Request) error {
	sch, err := s.opts.Engine.GetSchedule(req.Context(), req.PathValue("workspace"), req.PathValue("schedule"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sch)
	return nil
}

func (s *Server) updateSchedule(w http.ResponseWriter, req *http.Request) error {
	var upd api.JobScheduleUpdate
	if err := decode(req, &upd); err != nil {
		return err
	}
	sch, err := s.opts.Engine.UpdateSchedule(req.Context(), req.PathValue("workspace"), req.PathValue("schedule"), upd)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sch)
	return nil
}

func (s *Server) deleteSchedule(w http.ResponseWriter, req *http.Request) error {
	if err := s.opts.Engine.DeleteSchedule(req.Context(), req.PathValue("workspace"), req.PathValue("schedule")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
