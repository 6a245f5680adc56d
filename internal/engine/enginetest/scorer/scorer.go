// Package scorer is a tiny model server for tests of online endpoints: the command a test
// deployment runs (a test binary re-executing itself, or a helper built from it). It
// serves on $PORT as a deployment's command must:
//
//   - GET / and GET /health answer 200 "ok" (the default probe path is /), or 503 when
//     $SCORER_NEVER_READY is set, for tests of an instance that never becomes ready.
//   - POST /score answers {"deployment": $SCORER_NAME, "version": $SCORER_VERSION, "code":
//     <the contents of ./VERSION, the code directory's version>, "pid": <pid>, "body":
//     <request body>}, so a test sees which rollout of which deployment served a request.
//     With $AZUREML_MODEL_DIR set it adds "model": the contents of the file MODEL there
//     (read at every request, as a model file the deployment serves).
//     With ?sleep_ms=N it first writes the file $SCORER_MARKER_DIR/entered-<X-Request-Id>
//     (so a test knows the request holds its instance slot) and waits N ms; when the
//     router cancels the request first, it writes $SCORER_MARKER_DIR/cancelled-<X-Request-Id>
//     and answers nothing.
package scorer

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// startedAt is when the scorer's process began (package initialisation), listeningAt when
// it began to listen: the instance's own start time is the difference, which the
// autoscaling tests set against a request's latency from zero.
var startedAt, listeningAt = time.Now(), time.Time{}

// Serve serves until ctx ends.
func Serve(ctx context.Context) error {
	port := os.Getenv("PORT")
	if port == "" {
		return errors.New("scorer: PORT is not set")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return err
	}
	listeningAt = time.Now()
	srv := &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler is the scorer's HTTP handler.
// ImageVersionFile is the version file of the tests' container images: a scorer that runs
// in one replies with its content as "image".
const ImageVersionFile = "/usr/lib/mlctest/VERSION"

func Handler() http.Handler {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) {
		if os.Getenv("SCORER_NEVER_READY") != "" {
			http.Error(w, "never ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
	mux.HandleFunc("GET /{$}", ok)
	mux.HandleFunc("GET /health", ok)
	mux.HandleFunc("POST /score", score)
	return mux
}

func score(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if ms, err := strconv.Atoi(req.URL.Query().Get("sleep_ms")); err == nil && ms > 0 {
		mark := func(what string) {
			if dir := os.Getenv("SCORER_MARKER_DIR"); dir != "" {
				_ = os.WriteFile(filepath.Join(dir, what+"-"+filepath.Base(req.Header.Get("X-Request-Id"))), nil, 0o600)
			}
		}
		mark("entered")
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			mark("cancelled")
			return
		}
	}
	code, _ := os.ReadFile("VERSION")
	image, _ := os.ReadFile(ImageVersionFile)
	reply := map[string]any{
		"deployment": os.Getenv("SCORER_NAME"), "version": os.Getenv("SCORER_VERSION"), "image": strings.TrimSpace(string(image)),
		"code": strings.TrimSpace(string(code)), "pid": os.Getpid(), "body": json.RawMessage(orNull(body)),
		"started_unix_ns": startedAt.UnixNano(), "listening_unix_ns": listeningAt.UnixNano(),
	}
	if dir := os.Getenv("AZUREML_MODEL_DIR"); dir != "" {
		m, err := os.ReadFile(filepath.Join(dir, "MODEL"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		reply["model"] = strings.TrimSpace(string(m))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reply)
}

func orNull(b []byte) []byte {
	if !json.Valid(b) || len(b) == 0 {
		return []byte("null")
	}
	return b
}
