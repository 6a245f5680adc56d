package nodeagent

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
)

// routes is the agent's API. Handlers are thin: decode, call the agent, encode.
func (a *agent) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "pid": os.Getpid()})
	})
	mux.HandleFunc("GET /v1/info", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.info())
	})
	mux.HandleFunc("GET /v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.info().Tasks)
	})
	mux.HandleFunc("POST /v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		var req TaskRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, errInvalid{"decoding task request: " + err.Error()})
			return
		}
		st, err := a.startTask(r.Context(), req)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("GET /v1/tasks/{key}", a.withTask(func(w http.ResponseWriter, r *http.Request, t *task) {
		writeJSON(w, http.StatusOK, t.state())
	}))
	mux.HandleFunc("GET /v1/tasks/{key}/wait", a.withTask(func(w http.ResponseWriter, r *http.Request, t *task) {
		select {
		case <-t.done:
			writeJSON(w, http.StatusOK, t.state())
		case <-r.Context().Done():
		}
	}))
	mux.HandleFunc("POST /v1/tasks/{key}/kill", a.withTask(func(w http.ResponseWriter, r *http.Request, t *task) {
		t.kill()
		select {
		case <-t.done:
			writeJSON(w, http.StatusOK, t.state())
		case <-r.Context().Done():
		}
	}))
	mux.HandleFunc("GET /v1/tasks/{key}/output", a.withTask(func(w http.ResponseWriter, r *http.Request, t *task) {
		var offset int64
		if s := r.URL.Query().Get("offset"); s != "" {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v < 0 {
				writeError(w, errInvalid{"offset must be a non-negative integer"})
				return
			}
			offset = v
		}
		out, err := ReadOutput(a.dir, t.key, offset)
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
	}))
	return mux
}

// withTask resolves {key} to a task whose start attempt is over, or answers not_found.
func (a *agent) withTask(h func(http.ResponseWriter, *http.Request, *task)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("key")
		t, ok := a.lookup(key)
		if ok {
			select {
			case <-t.started:
			case <-r.Context().Done():
				return
			}
		}
		if !ok || t.startErr != nil {
			writeError(w, ErrNotFound)
			return
		}
		h(w, r, t)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError maps an error to its status and stable code in one place.
func writeError(w http.ResponseWriter, err error) {
	var inv errInvalid
	switch {
	case errors.Is(err, ErrNotFound):
		writeJSON(w, http.StatusNotFound, ErrorBody{Code: "not_found", Message: "no such task"})
	case errors.As(err, &inv):
		writeJSON(w, http.StatusBadRequest, ErrorBody{Code: "invalid", Message: inv.msg})
	case errors.Is(err, errShuttingDown):
		writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Code: "shutting_down", Message: err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, ErrorBody{Code: "internal", Message: err.Error()})
	}
}
