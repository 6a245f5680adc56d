package client_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	if waited := time.Since(start); err == nil || waited < 2*time.Second || waited > 5*time.Second {
		t.Fatalf("gave up after %s with %v; want an error at the 2.5s deadline", waited, err)
	}
}
