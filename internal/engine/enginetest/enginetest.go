// Package enginetest starts a real engine in-process for tests: a real store in a temp dir,
// the real HTTP server on a temporary unix socket, and a fake clock the test steps.
package enginetest

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Options adjust the engine a test gets.
type Options struct {
	Locations []string
	Token     string
}

// Engine is a running in-process engine.
type Engine struct {
	*engine.Engine
	// Endpoint is unix:///<tmp>/engine.sock, ready for the provider's endpoint attribute.
	Endpoint string
	Clock    *clocktesting.FakeClock
	DataDir  string
	// Driver is the fake node driver: tests finish tasks and kill nodes through it.
	Driver *fake.Driver
}

// Start starts an engine that stops when the test ends.
func Start(t testing.TB, opts Options) *Engine {
	t.Helper()
	// Unix socket paths are limited to 108 bytes, and t.TempDir can be long.
	dir, err := os.MkdirTemp("", "mlc-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	st, err := store.Open(filepath.Join(dir, "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	drv := fake.New(clk)
	eng, err := engine.New(engine.Config{Store: st, Clock: clk, Logger: logger, Locations: opts.Locations, Version: "test", DataDir: dir, Driver: drv})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := eng.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: server.New(server.Options{Engine: eng, Logger: logger, Token: opts.Token}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		cancel()
		_ = st.Close()
	})
	return &Engine{Engine: eng, Endpoint: "unix://" + sock, Clock: clk, DataDir: dir, Driver: drv}
}

// Client returns a client of the engine.
func (e *Engine) Client(t testing.TB, token string) *client.Client {
	t.Helper()
	c, err := client.New(e.Endpoint, token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}
