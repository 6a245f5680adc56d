package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
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
	body := http.MaxBytesReader(w, req.Body, 320<<20)
	if s.opts.Snapshots == nil {
		id, err := s.opts.Engine.PutSnapshot(body)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, api.SnapshotRef{ID: id})
		return nil
	}
	id, err := s.opts.Snapshots.Put(body)
	if err != nil {
		return snapshotError(err)
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

// history serves the last hour's samples of the workspace's computes and deployments.
func (s *Server) history(w http.ResponseWriter, req *http.Request) error {
	h, err := s.opts.Engine.History(req.Context(), req.PathValue("workspace"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

func (s *Server) submitJob(w http.ResponseWriter, req *http.Request) error {
	var spec api.JobSpec
	if err := decode(req, &spec); err != nil {
		return err
	}
	if err := validation.Job(spec); err != nil {
		return err
	}
	c := callOf(req)
	spec.SubmittedBy = c.id.Name
	j, err := s.opts.Engine.SubmitJob(req.Context(), req.PathValue("workspace"), spec, req.Header.Get(api.IdempotencyKeyHeader))
	if err != nil {
		return err
	}
	c.target = req.URL.Path + "/" + j.ID
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

func (s *Server) deleteJob(w http.ResponseWriter, req *http.Request) error {
	if err := s.opts.Engine.DeleteJob(req.Context(), req.PathValue("workspace"), req.PathValue("job")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// downloadJobOutput streams a registered output as a tar archive. Its digest, size and
// file count travel in headers, so a client checks what it received.
// getJobOutput answers what a registered output is (digest, size, file count) without its
// files: the provider plans a deployment's model_digest from it.
func (s *Server) getJobOutput(w http.ResponseWriter, req *http.Request) error {
	out, err := s.opts.Engine.JobOutput(req.Context(), req.PathValue("workspace"), req.PathValue("job"), req.PathValue("output"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) downloadJobOutput(w http.ResponseWriter, req *http.Request) error {
	out, err := s.opts.Engine.JobOutput(req.Context(), req.PathValue("workspace"), req.PathValue("job"), req.PathValue("output"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set(api.OutputDigestHeader, out.Digest)
	w.Header().Set(api.OutputSizeHeader, strconv.FormatInt(out.Size, 10))
	w.Header().Set(api.OutputFileCountHeader, strconv.FormatInt(out.FileCount, 10))
	if err := s.opts.Engine.WriteJobOutput(req.Context(), w, out.Digest); err != nil {
		// The status is sent: a broken stream is what tells the client.
		s.log.Error("streaming a job output failed", "job", req.PathValue("job"), "output", req.PathValue("output"), "error", err)
		panic(http.ErrAbortHandler)
	}
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

func (s *Server) rerunJob(w http.ResponseWriter, req *http.Request) error {
	var body api.RerunRequest
	if err := decode(req, &body); err != nil {
		return err
	}
	j, err := s.opts.Engine.RerunJob(req.Context(), req.PathValue("workspace"), req.PathValue("job"), body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, j)
	return nil
}

func (s *Server) jobLogs(w http.ResponseWriter, req *http.Request) error {
	rank, err := queryNonNegative(req, "rank")
	if err != nil {
		return err
	}
	offset, err := queryNonNegative(req, "offset")
	if err != nil {
		return err
	}
	if follow, _ := strconv.ParseBool(req.URL.Query().Get("follow")); follow {
		return s.followJobLogs(w, req, int(rank), offset)
	}
	data, next, complete, err := s.opts.Engine.JobLogs(req.Context(), req.PathValue("workspace"), req.PathValue("job"), int(rank), offset)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.LogChunk{Data: data, NextOffset: next, Complete: complete})
	return nil
}

// followJobLogs streams a rank's output as it appears (GET .../logs?follow=true): the raw
// bytes, in chunks flushed as they come, until the job has ended and its output is all
// sent. The trailer api.LogCompleteTrailer then says so and api.LogNextOffsetTrailer holds
// the offset after the last byte; a stream cut before them was not complete, and the
// client follows again from the offset it has reached. Errors found before the first byte
// (no such job, a bad rank) are answered as usual.
func (s *Server) followJobLogs(w http.ResponseWriter, req *http.Request, rank int, offset int64) error {
	ws, id := req.PathValue("workspace"), req.PathValue("job")
	if _, _, _, err := s.opts.Engine.JobLogs(req.Context(), ws, id, rank, offset); err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Trailer", api.LogCompleteTrailer+", "+api.LogNextOffsetTrailer)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	next, err := s.opts.Engine.FollowJobLogs(req.Context(), ws, id, rank, offset, func(data []byte) error {
		if _, err := w.Write(data); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil {
		// The status is sent: the missing trailer tells the client the stream is incomplete.
		s.log.Debug("job log stream ended early", "job", id, "rank", rank, "error", err)
		return nil
	}
	w.Header().Set(api.LogNextOffsetTrailer, strconv.FormatInt(next, 10))
	w.Header().Set(api.LogCompleteTrailer, "true")
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

// queryNonNegative is queryInt for a value that must be 0 or more (an offset, a rank).
func queryNonNegative(req *http.Request, name string) (int64, error) {
	n, err := queryInt(req, name)
	if err == nil && n < 0 {
		return 0, api.Errorf(api.CodeInvalid, name, "%s must be 0 or more, got %d", name, n)
	}
	return n, err
}

// snapshotError maps a failed snapshot upload to the API: a bad or oversized archive and a
// body over the size limit are the client's fault (400); anything else (a full disk, a
// permission) is this machine's, reported as an internal error with its cause.
func snapshotError(err error) error {
	var limit *snapshot.LimitError
	var tooBig *http.MaxBytesError
	switch {
	case snapshot.IsInvalidArchive(err), errors.As(err, &limit):
		return api.Errorf(api.CodeInvalid, "snapshot", "%v", err)
	case errors.As(err, &tooBig):
		return api.Errorf(api.CodeInvalid, "snapshot", "the upload is larger than %d bytes", tooBig.Limit)
	}
	return fmt.Errorf("storing the code snapshot: %w", err)
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

// exec upgrades the connection to an exec session (api.ExecProtocol): the command comes
// as repeated ?arg= values, then frames flow both ways until the command ends.
func (s *Server) exec(w http.ResponseWriter, req *http.Request) error {
	if !strings.EqualFold(req.Header.Get("Upgrade"), api.ExecProtocol) {
		return api.Errorf(api.CodeInvalid, "", "exec needs the header Upgrade: %s", api.ExecProtocol)
	}
	command := req.URL.Query()["arg"]
	if len(command) == 0 {
		return api.Errorf(api.CodeInvalid, "command", "exec needs a command (?arg=...)")
	}
	if err := validation.Command("command", command); err != nil {
		return err
	}
	ws, name := req.PathValue("workspace"), req.PathValue("compute")
	if _, err := s.opts.Engine.GetCompute(req.Context(), ws, name); err != nil {
		return err
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return fmt.Errorf("taking over the connection: %w", err)
	}
	defer conn.Close()
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", api.ExecProtocol)
	if err := rw.Flush(); err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdin, feed := io.Pipe()
	go func() {
		// Frames from the client; a dropped connection ends the session.
		defer cancel()
		for {
			kind, payload, err := api.ReadFrame(rw)
			if err != nil {
				feed.CloseWithError(io.ErrUnexpectedEOF)
				return
			}
			switch kind {
			case api.FrameStdin:
				if _, err := feed.Write(payload); err != nil {
					return
				}
			case api.FrameStdinEOF:
				feed.Close()
			}
		}
	}()
	out := &lockedWriter{w: rw}
	code, err := s.opts.Engine.Exec(ctx, ws, name, command, stdin, api.FrameWriter{W: out, Kind: api.FrameOutput})
	if err != nil {
		_ = api.WriteFrame(out, api.FrameError, []byte(err.Error()))
	} else {
		_ = api.WriteFrame(out, api.FrameExit, api.ExecExitCode(code))
	}
	return nil
}

// lockedWriter serialises frame writes and flushes each one.
type lockedWriter struct {
	mu sync.Mutex
	w  *bufio.ReadWriter
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(p)
	if err == nil {
		err = l.w.Flush()
	}
	return n, err
}
