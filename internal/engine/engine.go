// Package engine is the control plane: it owns the store, enforces the domain rules on every
// call and (in later layers) drives nodes. It never imports Terraform packages, so it is used
// alike by the daemon, the CLI and tests.
package engine

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
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

	// mu serialises writers so that read-check-write sequences (name taken? quota left?)
	// see a consistent store; bbolt already serialises the commits themselves.
	mu sync.Mutex
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
	if cfg.NodesDriver == "" {
		cfg.NodesDriver = "local"
	}
	return &Engine{
		store:       cfg.Store,
		clock:       cfg.Clock,
		log:         cfg.Logger.Named("engine"),
		locations:   append([]string(nil), cfg.Locations...),
		nodesDriver: cfg.NodesDriver,
		version:     cfg.Version,
		dataDir:     cfg.DataDir,
		startedAt:   cfg.Clock.Now().UTC(),
	}, nil
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
		for _, b := range []store.Bucket{store.Nodes, store.Jobs, store.Endpoints} {
			if len(tx.Keys(b, "")) > 0 {
				busy = true
			}
		}
		return nil
	})
	return busy
}

// Sizes lists catalog entries matching f.
func (e *Engine) Sizes(f api.SizeFilter) []api.VMSize { return catalog.List(f) }

// IsolatedSizes lists the isolated catalog entries.
func (e *Engine) IsolatedSizes() []api.VMSize { return catalog.Isolated() }
