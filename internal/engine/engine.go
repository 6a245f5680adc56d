// Package engine is the control plane: it owns the store, enforces the domain rules on every
// call and (in later layers) drives nodes. It never imports Terraform packages, so it is used
// alike by the daemon, the CLI and tests.
package engine

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// DefaultLocation is the location served when the operator names none.
const DefaultLocation = "local"

// Config is what an engine is built from. Store and Clock are required.
type Config struct {
	Store       *store.Store
	Clock       clock.WithTicker
	Logger      hclog.Logger
	Locations   []string
	NodesDriver string
	Version     string
	DataDir     string
	// Driver brings nodes up and down; required for computes (Start fails without one).
	Driver driver.Driver
	// Snapshots keeps uploaded code snapshots for jobs.
	Snapshots model.SnapshotStore
	// CapacityVCPUs bounds the vCPUs all nodes together may hold; 0 means unlimited.
	CapacityVCPUs int64
	// NewID makes node and instance IDs ("<prefix>-<unique>"); the default draws them from
	// crypto/rand. The simulation gives a seeded source, so a seed replays exactly.
	NewID func(prefix string) string
	// Manual makes the engine run nothing by itself: tests and the simulation drive it with
	// Settle (see package runtime). The daemon leaves it false.
	Manual bool
	// MinIdleShutdown is the shortest idle_time_before_shutdown an instance may ask for
	// (default 15 minutes, as in Azure).
	MinIdleShutdown time.Duration
}

// Engine is the control plane. Its methods are safe for concurrent use.
type Engine struct {
	store       *store.Store
	clock       clock.WithTicker
	log         hclog.Logger
	locations   []string
	nodesDriver string
	version     string
	dataDir     string
	startedAt   time.Time

	driver    driver.Driver
	snapshots model.SnapshotStore
	capacity  int64
	// minIdleShutdown is the engine's idle-shutdown policy minimum.
	minIdleShutdown time.Duration
	// quota sums the vCPUs computes hold per workspace and family (updated under mu).
	quota *model.QuotaIndex
	ctx   context.Context

	// mu serialises writers so that read-check-write sequences (name taken? quota left?)
	// see a consistent store; bbolt already serialises the commits themselves. The fields
	// below it are guarded by it.
	mu        sync.Mutex
	backoff   map[string]time.Time // compute key -> no node creation before
	releasing map[string]bool      // node keys with a Terminate in flight
	sessions  map[string]int       // compute key -> open interactive sessions

	// loop is the work loop (runtime), made by Start; manual selects its manual mode.
	loop   *runtime.Loop
	manual bool
	newID  func(prefix string) string

	// endpoints runs online endpoints (package controllers/endpoints).
	endpoints *endpoints.Controller
}

// New builds an engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil || cfg.Clock == nil {
		return nil, fmt.Errorf("engine config needs a store and a clock")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if len(cfg.Locations) == 0 {
		cfg.Locations = []string{DefaultLocation}
	}
	if cfg.MinIdleShutdown == 0 {
		cfg.MinIdleShutdown = validation.DefaultMinIdleTimeBeforeShutdown
	}
	if cfg.NewID == nil {
		cfg.NewID = randomID
	}
	if cfg.NodesDriver == "" {
		cfg.NodesDriver = "local"
	}
	e := &Engine{
		minIdleShutdown: cfg.MinIdleShutdown,
		store:           cfg.Store,
		clock:           cfg.Clock,
		log:             cfg.Logger.Named("engine"),
		locations:       append([]string(nil), cfg.Locations...),
		nodesDriver:     cfg.NodesDriver,
		version:         cfg.Version,
		dataDir:         cfg.DataDir,
		startedAt:       cfg.Clock.Now().UTC(),
		driver:          cfg.Driver,
		snapshots:       cfg.Snapshots,
		capacity:        cfg.CapacityVCPUs,
		sessions:        map[string]int{},
		ctx:             context.Background(),
		backoff:         map[string]time.Time{},
		releasing:       map[string]bool{},
		manual:          cfg.Manual,
		newID:           cfg.NewID,
		quota:           model.NewQuotaIndex(),
	}
	e.loop = e.newLoop()
	if err := e.loadQuotaIndex(); err != nil {
		return nil, fmt.Errorf("indexing computes: %w", err)
	}
	e.endpoints = endpoints.New(endpoints.Config{
		Store: e.store, Clock: e.clock, Logger: e.log, Loop: e.loop, Snapshots: e.snapshots, NewID: e.newID,
	})
	e.loop.Handle(runtime.Endpoint, e.endpoints.Reconcile)
	return e, nil
}

// Status describes the engine.
func (e *Engine) Status() api.Status {
	return api.Status{
		Version:     e.version,
		PID:         os.Getpid(),
		NodesDriver: e.nodesDriver,
		Locations:   append([]string(nil), e.locations...),
		DataDir:     e.dataDir,
		StartedAt:   e.startedAt,
		ScoringURL:  e.endpoints.ScoringBase(),
	}
}

// Locations lists the locations this engine serves.
func (e *Engine) Locations() []string { return append([]string(nil), e.locations...) }

// HasWork reports whether the engine manages anything that needs it to stay up: a node,
// instance, endpoint or job running or queued, or an enabled schedule. Workspaces alone are
// records, not work, so an engine holding only workspaces may exit when idle.
func (e *Engine) HasWork() bool {
	var busy bool
	_ = e.store.View(func(tx *store.Tx) error {
		if busyNodes(tx) || len(tx.Keys(store.Endpoints, "")) > 0 {
			busy = true
			return nil
		}
		jobs, err := store.List[model.Job](tx, store.Jobs, "")
		if err != nil {
			return err
		}
		for _, j := range jobs {
			busy = busy || !api.Terminal(j.Status)
		}
		// An enabled schedule must fire even while its instance is stopped.
		computes, err := store.List[model.Compute](tx, store.Computes, "")
		for _, c := range computes {
			if c.Instance == nil {
				continue
			}
			for _, sc := range c.Instance.Settings.Schedules {
				busy = busy || sc.IsEnabled()
			}
		}
		return err
	})
	return busy
}

// Sizes lists catalog entries matching f.
func (e *Engine) Sizes(f api.SizeFilter) []api.VMSize { return catalog.List(f) }

// IsolatedSizes lists the isolated catalog entries.
func (e *Engine) IsolatedSizes() []api.VMSize { return catalog.Isolated() }
