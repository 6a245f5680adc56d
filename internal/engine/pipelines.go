package engine

import (
	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/pipelines"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// The engine's use of the pipelines' controller: its wiring, its wake-ups, and the API
// calls that concern pipeline jobs.

func newPipelines(e *Engine, cfg Config, log hclog.Logger) *pipelines.Controller {
	pc := pipelines.Config{
		Write: e.core.Write, View: e.core.View, Clock: cfg.Clock, Logger: log, Jobs: e.jobs,
		Mark:               func(name string) { e.loop.Mark(runtime.PipelineKey(name)) },
		NoContainerRuntime: e.core.NoContainerRuntime,
	}
	if cfg.Artifacts != nil {
		pc.Artifacts = cfg.Artifacts
	}
	// A step's job that ends leaves a wake marker for its pipeline in the write that ends
	// it (model.PutJob), whoever writes it: the pipeline is reconciled once it commits.
	cfg.Store.OnCommit(store.PipelineWakes, func() { e.loop.Go(e.wakePipelines) })
	return pipelines.New(pc)
}

// wakePipelines has every pipeline with a wake marker reconciled.
func (e *Engine) wakePipelines() {
	_ = e.store.View(func(tx *store.Tx) error {
		for _, w := range model.PipelineWakes(tx) {
			e.loop.Mark(runtime.PipelineKey(w.Workspace + "/" + w.Pipeline))
		}
		return nil
	})
}

// resumePipelines has every pipeline that has not ended reconciled, once at start: the
// steps that ended while the engine was down are taken in, the steps chosen but not
// queued are queued, and nothing that finished runs again.
func (e *Engine) resumePipelines() {
	_ = e.store.View(func(tx *store.Tx) error {
		for _, name := range model.ActivePipelines(tx) {
			e.loop.Mark(runtime.PipelineKey(name))
		}
		return nil
	})
	e.wakePipelines()
}
