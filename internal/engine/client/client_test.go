package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// serveLater starts serving an engine's API on sock after delay, as an engine restarted
// after a crash would, and returns the engine.
func serveLater(t *testing.T, sock string, delay time.Duration) *engine.Engine {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Config{Store: st, Clock: clocktesting.NewFakeClock(time.Unix(0, 0)), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: server.New(server.Options{Engine: eng})}
	t.Cleanup(func() { srv.Close() })
	timer := time.AfterFunc(delay, func() {
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Errorf("listening: %v", err)
			return
		}
		go func() { _ = srv.Serve(ln) }()
	})
	t.Cleanup(func() { timer.Stop() })
	return eng
}

func socketPath(t *testing.T) string {
	dir, err := os.MkdirTemp("", "mlc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "engine.sock")
}

// An engine that is away for longer than a few retries is waited for until the call's
// deadline, not given up on after about 1.5 s: a create made while the engine restarts
// goes through once it is back, exactly once.
func TestCallWithDeadlineWaitsForTheEngine(t *testing.T) {
	sock := socketPath(t)
	eng := serveLater(t, sock, 3*time.Second)
	c, err := client.New("unix://"+sock, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	ws, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team-a"})
	if err != nil {
		t.Fatalf("create while the engine was away for 3s (20s deadline): %v", err)
	}
	if waited := time.Since(start); waited < 3*time.Second || ws.Name != "team-a" {
		t.Fatalf("got %+v after %s; want team-a after at least 3s", ws, waited)
	}
	list, _ := eng.ListWorkspaces(context.Background())
	if len(list) != 1 {
		t.Fatalf("%d workspaces; want 1", len(list))
	}
}

// A call with no deadline gives up after the client's unreachable wait.
func TestCallWithoutDeadlineGivesUpAfterTheWait(t *testing.T) {
	sock := socketPath(t)
	c, err := client.New("unix://"+sock, "", client.WithUnreachableWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Status(context.Background())
	waited := time.Since(start)
	if !client.IsUnreachable(err) {
		t.Fatalf("status of an engine that never answers: %v; want an unreachable error", err)
	}
	if waited < 400*time.Millisecond || waited > 3*time.Second {
		t.Fatalf("gave up after %s; want about 500ms", waited)
	}
}

// The deadline ends the wait even when the engine never comes back.
func TestCallGivesUpAtItsDeadline(t *testing.T) {
	sock := socketPath(t)
	c, err := client.New("unix://"+sock, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.GetWorkspace(ctx, "team-a")
	// At least until the deadline (it retried), and nowhere near forever: the upper bound
	// leaves a loaded machine room.
	if waited := time.Since(start); err == nil || waited < 2*time.Second || waited > 15*time.Second {
		t.Fatalf("gave up after %s with %v; want an error at the 2.5s deadline", waited, err)
	}
}

// A proxy in front of the engine answers 502, 503 or 504 while the engine is away; that
// is retried like a lost connection. The engine's own 503 (an API error body) is not.
func TestGatewayFailuresAreRetried(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch calls.Add(1) {
		case 1:
			http.Error(w, "bad gateway", http.StatusBadGateway)
		case 2:
			w.WriteHeader(http.StatusGatewayTimeout)
		default:
			_, _ = w.Write([]byte(`{"id":"/workspaces/a","name":"a"}`))
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, err := c.GetWorkspace(ctx, "a")
	if err != nil || ws.Name != "a" || calls.Load() != 3 {
		t.Fatalf("GetWorkspace through a proxy = %+v, %v after %d calls; want a after 3", ws, err, calls.Load())
	}

	engine503 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"still deleting"}}`))
	}))
	defer engine503.Close()
	c, _ = client.New(engine503.URL, "tok")
	calls.Store(0)
	if _, err := c.GetWorkspace(ctx, "a"); api.CodeOf(err) != api.CodeUnavailable || calls.Load() != 1 {
		t.Fatalf("engine's own 503 = %v after %d calls; want unavailable after 1", err, calls.Load())
	}
}

// A call that may not be repeated (POST /v1/shutdown) is sent again only when it never
// reached the engine: one whose connection drops after the engine read it is not, even
// with an engine to reconnect to.
func TestCallThatReachedTheEngineIsNotSentTwice(t *testing.T) {
	var hits, reconnects atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // the engine "crashed" after reading the call
		}
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "", client.WithReconnect(func(context.Context) error {
		reconnects.Add(1)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Shutdown(context.Background()); err == nil {
		t.Fatal("a call whose connection dropped succeeded")
	}
	if hits.Load() != 1 || reconnects.Load() != 0 {
		t.Fatalf("the engine got the call %d times, %d reconnects; want once, none", hits.Load(), reconnects.Load())
	}
}
