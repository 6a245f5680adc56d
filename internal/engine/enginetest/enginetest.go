// Package enginetest starts a real engine in-process for tests: a real store in a temp dir,
// the real HTTP server on a temporary unix socket, and a fake clock the test steps.
package enginetest

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/auth"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/local"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/route"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Options adjust the engine a test gets.
type Options struct {
	Locations []string
	Token     string
	// AgentArgv, when set, gives the engine the real local driver: every node is a node
	// agent started with this command (plus "--dir DIR"), e.g. [test binary, "engine",
	// "node-agent"] from a test binary whose TestMain dispatches to cli.Main. Online
	// endpoints then serve real HTTP on the scoring listener. With real processes the
	// engine runs on the real clock (Engine.Clock is nil), and every node still alive when
	// the test ends is terminated.
	AgentArgv []string
	// Fake adjusts the fake node driver (without AgentArgv), e.g. nodes created pending.
	Fake fake.Options
	// MinIdleShutdown is the idle-shutdown policy's minimum ('serve --min-idle-shutdown');
	// zero keeps the engine's default.
	MinIdleShutdown time.Duration
	// NewKubeDriver and KubeImage give the engine the node driver of attached Kubernetes
	// clusters and their pods' default image (engine.Config).
	NewKubeDriver route.NewKubeDriver
	KubeImage     string
}

// Engine is a running in-process engine.
type Engine struct {
	*engine.Engine
	// Endpoint is unix:///<tmp>/engine.sock, ready for the provider's endpoint attribute.
	Endpoint string
	Clock    *clocktesting.FakeClock
	DataDir  string
	// Driver is the fake node driver: tests finish tasks and kill nodes through it. Nil
	// with Options.AgentArgv.
	Driver *fake.Driver
	// ScoringURL is the base URL of the scoring router (an endpoint's scoring_uri is this
	// plus /{name}/score).
	ScoringURL string
	// Metrics is what GET /metrics serves; tests record node lifecycle events through it
	// until the engine does.
	Metrics *metrics.Metrics
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
	fakeClock := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	var (
		clk     clock.WithTicker = fakeClock
		drv     driver.Driver
		fakeDrv *fake.Driver
	)
	if len(opts.AgentArgv) > 0 {
		clk, fakeClock = clock.RealClock{}, nil
		local, err := local.New(local.Config{Dir: filepath.Join(dir, "nodes"), AgentArgv: opts.AgentArgv, Clock: clk, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		drv = local
		t.Cleanup(func() { terminateAll(t, local) })
	} else {
		fakeDrv = fake.NewWithOptions(fakeClock, opts.Fake)
		drv = fakeDrv
	}
	snapshots := snapshot.NewStore(filepath.Join(dir, "snapshots"))
	arts, err := artifacts.Open(filepath.Join(dir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{
		Store: st, Clock: clk, Logger: logger, Locations: opts.Locations, Version: "test", DataDir: dir, Driver: drv,
		Snapshots: snapshots, Artifacts: arts, MinIdleShutdown: opts.MinIdleShutdown,
		NewKubeDriver: opts.NewKubeDriver, KubeImage: opts.KubeImage,
	})
	if err != nil {
		t.Fatal(err)
	}
	scoringLn, err := eng.ListenScoring("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Request latencies are wall time, so the metrics keep the real clock.
	m := metrics.New(metrics.Options{Source: eng})
	scoring := eng.ScoringServer(m, logger)
	go func() { _ = scoring.Serve(scoringLn) }()
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
	tokens, err := auth.OpenTokens(st, clk)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := auth.OpenAudit(filepath.Join(dir, auth.AuditFile))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: server.New(server.Options{
		Engine: eng, Logger: logger, Token: opts.Token, Tokens: tokens, Audit: audit, Metrics: m,
		Snapshots: snapshots, Backup: st.Backup,
		BackupArchive: func(ctx context.Context, w io.Writer) error {
			return eng.Backup(ctx, w, "state.db", "artifacts", "snapshots")
		},
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		_ = scoring.Close()
		eng.CloseScoring()
		cancel()
		_ = st.Close()
		_ = audit.Close()
	})
	return &Engine{Engine: eng, Endpoint: "unix://" + sock, Clock: fakeClock, DataDir: dir, Driver: fakeDrv, ScoringURL: eng.Status().ScoringURL, Metrics: m}
}

// terminateAll stops every node the local driver still has, so no process outlives a test.
func terminateAll(t testing.TB, d *local.Driver) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes, err := d.List(ctx, "")
	if err != nil {
		t.Errorf("listing nodes left by the test: %v", err)
	}
	for _, n := range nodes {
		if err := d.Terminate(ctx, n.Key); err != nil {
			t.Errorf("terminating node %s left by the test: %v", n.Key, err)
		}
	}
	_ = d.Close()
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
