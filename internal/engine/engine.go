// Package engine is the control plane's composition root: it builds the store's users (the
// compute core and the controllers of workspaces, clusters, instances, attached machines,
// jobs and online endpoints), wires them to the work loop, the node lifecycle, the tasks
// and the node driver, and hands them to their API (package dispatch, embedded in Engine).
// It decides nothing itself: every rule lives in a package of rules/, every concern in a
// package of controllers/. It never imports Terraform packages, so it is used alike by the
// daemon, the CLI and tests.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/attachcheck"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/attached"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/clusters"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/endpointapi"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/environments"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/instances"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/jobs"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/pipelines"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/schedules"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/workspaces"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/dispatch"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/route"
	sshdrv "github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/history"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/lifecycle"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/scoring"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tasks"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

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
	// Artifacts is the store of job outputs, in the data dir; nil in engines that keep
	// none (the simulation): a job that declares outputs then fails at its end, saying so.
	// MaxOutputSize bounds each output (0: no bound).
	Artifacts     *artifacts.Store
	MaxOutputSize int64
	// CapacityVCPUs bounds the vCPUs all nodes together may hold; 0 means unlimited.
	CapacityVCPUs int64
	// GPUs are this machine's GPUs (mlcompute serve --gpus, --fake-gpus, or found), handed
	// out to local nodes of GPU sizes (NodesDriver "local"); empty: none.
	GPUs []string
	// ContainerdAddress is the containerd the local nodes run tasks in container images
	// with (mlcompute serve --containerd-address): only with one are jobs and deployments in
	// container environments taken. Empty: none.
	ContainerdAddress string
	// Containers runs tasks in container images on attached machines and, with
	// NodesDriver "slurm", on the Slurm nodes (the driver's own copy of it); nil: neither
	// runs container environments.
	Containers *sshdrv.ContainerRunner
	// NewID makes node and instance IDs ("<prefix>-<unique>"); the default draws them from
	// crypto/rand. The simulation gives a seeded source, so a seed replays exactly.
	NewID func(prefix string) string
	// Manual makes the engine run nothing by itself: tests and the simulation drive it with
	// Settle (see package runtime). The daemon leaves it false.
	Manual bool
	// NewKubeDriver builds the node driver of one attached Kubernetes cluster (its pods
	// are the nodes of the jobs that run there). Nil: attached clusters can be attached
	// and checked, but a job on one fails with a clear error.
	NewKubeDriver route.NewKubeDriver
	// KubeImage is the image of job pods on an attached cluster that sets no
	// kubernetes.image (the daemon gives --kube-image, else MLCOMPUTE_KUBE_IMAGE); empty:
	// such a cluster is refused at attach.
	KubeImage string
	// KubeChecks are the calls an attach makes to a cluster; nil makes them with the
	// Kubernetes driver's checks (attachcheck.Checks; tests give fakes).
	KubeChecks attached.KubeChecks
	// MinIdleShutdown is the shortest idle_time_before_shutdown an instance may ask for
	// (default 15 minutes, as in Azure).
	MinIdleShutdown time.Duration
	// NodeAPI is what processes on an instance's node get to report activity: the API's
	// address as the node reaches it, and the key of their activity tokens.
	NodeAPI instances.NodeAPI
}

// Engine is the control plane. Its methods, and its API's (package dispatch), are safe
// for concurrent use.
type Engine struct {
	// API is the engine's API: each call goes to the controller of its concern.
	*dispatch.API

	store     *store.Store
	clock     clock.WithTicker
	log       hclog.Logger
	locations []string
	// minIdleShutdown is the idle-shutdown policy's minimum, for Status.
	minIdleShutdown time.Duration
	nodesDriver     string
	version         string
	dataDir         string
	artifacts       *artifacts.Store
	startedAt       time.Time
	manual          bool
	// driver is the operator's driver until Start routes attached computes' nodes around it
	// (driver/route, with routes).
	driver driver.Driver
	routes route.Config

	loop       *runtime.Loop
	nodes      *lifecycle.Nodes
	tasks      *tasks.Tasks
	core       *computes.Core
	workspaces *workspaces.Controller
	clusters   *clusters.Controller
	instances  *instances.Controller
	attached   *attached.Controller
	jobs       *jobs.Controller
	pipelines  *pipelines.Controller
	endpoints  *endpoints.Controller
	// endpointAPI serves the online endpoints' calls; endpoints runs what they declare.
	endpointAPI *endpointapi.API
	scoring     *scoring.Front
	envs        *environments.Controller
	// history is what the status page plots, sampled while the engine runs.
	history   *history.History
	schedules *schedules.Controller
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
		cfg.Locations = []string{api.DefaultLocation}
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
	log := cfg.Logger.Named("engine")
	e := &Engine{
		store: cfg.Store, clock: cfg.Clock, log: log, locations: append([]string(nil), cfg.Locations...),
		nodesDriver: cfg.NodesDriver, version: cfg.Version, dataDir: cfg.DataDir, artifacts: cfg.Artifacts, startedAt: cfg.Clock.Now().UTC(),
		manual: cfg.Manual, driver: cfg.Driver, minIdleShutdown: cfg.MinIdleShutdown,
		history: history.New(cfg.Clock.Now()),
	}
	e.loop = runtime.New(runtime.Config{Clock: cfg.Clock, Manual: cfg.Manual, OnTimer: e.onTimer})
	e.nodes = lifecycle.New(lifecycle.Config{Clock: cfg.Clock, Logger: log, Loop: e.loop})
	e.tasks = tasks.New(e.loop, log)
	core, err := computes.New(computes.Config{
		Store: cfg.Store, Clock: cfg.Clock, Logger: log, Loop: e.loop, Snapshots: cfg.Snapshots, Artifacts: cfg.Artifacts, Nodes: e.nodes, Tasks: e.tasks,
		DataDir: cfg.DataDir, EnvCacheDir: envCacheDir(cfg), CapacityVCPUs: cfg.CapacityVCPUs, NewID: cfg.NewID,
		Local: cfg.NodesDriver == "local", GPUs: gpusOf(cfg), Containers: ownNodesRunContainers(cfg), PodNodes: cfg.NodesDriver == "kubernetes", AttachedContainers: cfg.Containers != nil,
	})
	if err != nil {
		return nil, fmt.Errorf("indexing computes: %w", err)
	}
	e.core = core
	e.clusters = clusters.New(core)
	e.instances = instances.New(instances.Config{Core: core, MinIdleShutdown: cfg.MinIdleShutdown, DataDir: cfg.DataDir, NodeAPI: cfg.NodeAPI})
	checks := attachcheck.Checks{KubeImage: cfg.KubeImage}
	clusterChecks := cfg.KubeChecks
	if clusterChecks == nil {
		clusterChecks = checks
	}
	e.attached = attached.New(core, attached.Config{
		DefaultKubeImage: cfg.KubeImage, DefaultKubeImageFrom: kubernetes.ImageEnv, KubeJobs: cfg.NewKubeDriver != nil,
		Machines: checks, Clusters: clusterChecks,
	})
	e.routes = route.Config{Lookups: e.attached, NewKubeDriver: cfg.NewKubeDriver, DefaultKubeImage: cfg.KubeImage, Containers: cfg.Containers, Logger: log}
	e.jobs = jobs.New(core, jobs.Config{
		Snapshots: cfg.Snapshots, Kube: e.attached, SharedFilesystem: cfg.NodesDriver == "local",
		Artifacts: cfg.Artifacts, MaxOutputSize: cfg.MaxOutputSize,
		// A job that ended may have been the last user of an old environment build.
		AfterRankExit: func() { e.loop.Go(e.envs.Collect) },
	})
	// The owners of the tasks on computes' nodes, asked in turn to claim a task that ended:
	// the jobs controller claims every task no other owner does, so it goes last.
	core.RegisterTaskOwner(e.instances)
	core.RegisterTaskOwner(e.jobs)
	core.RegisterPass(api.TypeComputeCluster, e.clusters.Pass)
	core.RegisterPass(api.TypeAttached, e.clusters.Pass)     // an attached machine is a cluster of one fixed node
	core.RegisterPass(api.TypeKubernetes, attached.KubePass) // an attached cluster holds no node: its jobs' computes do
	core.RegisterPass(api.TypeComputeInstance, e.instances.Pass)
	e.scoring = scoring.New(cfg.Store, cfg.Clock, log, router.Options{})
	e.endpoints = endpoints.New(endpoints.Config{
		Store: cfg.Store, Clock: cfg.Clock, Logger: log, Loop: e.loop, Snapshots: cfg.Snapshots, Artifacts: cfg.Artifacts, NewID: cfg.NewID,
		EnvCacheDir: envCacheDir(cfg), Quota: core.QuotaIndex(), Nodes: e.nodes, Tasks: e.tasks, Scoring: e.scoring, Turns: core,
	})
	e.endpointAPI = endpointapi.New(endpointapi.Config{
		Store: cfg.Store, Clock: cfg.Clock, Logger: log, Loop: e.loop, Snapshots: cfg.Snapshots, Artifacts: cfg.Artifacts,
		Quota: core.QuotaIndex(), NoContainerRuntime: core.NoDeploymentRuntime, Scoring: e.scoring, Turns: core, Router: e.endpoints,
	})
	if err := e.endpointAPI.LoadQuotaIndex(); err != nil {
		return nil, fmt.Errorf("indexing endpoints' quota: %w", err)
	}
	e.envs = environments.New(environments.Config{
		Store: cfg.Store, Clock: cfg.Clock, Logger: log, OnChange: e.endpointAPI.EnvironmentChanged,
		CacheDir: envCacheDir(cfg), Snapshots: cfg.Snapshots, NoContainerRuntime: core.NoDeploymentRuntime,
		ContainerdAddress: cfg.ContainerdAddress,
	})
	e.workspaces = workspaces.New(workspaces.Config{
		Store: cfg.Store, Clock: cfg.Clock, Logger: log, Write: core.Write, Locations: e.locations,
		DeleteComputes: core.DeleteWorkspace, DeleteEndpoints: e.endpointAPI.DeleteWorkspace,
	})
	e.pipelines = newPipelines(e, cfg, log)
	e.schedules = newSchedules(e, cfg, log)
	e.API = dispatch.New(dispatch.Controllers{
		Store: cfg.Store, Clock: cfg.Clock, Core: core, Workspaces: e.workspaces, Clusters: e.clusters,
		Instances: e.instances, Attached: e.attached, Jobs: e.jobs, Pipelines: e.pipelines,
		Endpoints: e.endpoints, EndpointAPI: e.endpointAPI, Scoring: e.scoring, Envs: e.envs,
		Schedules: e.schedules, History: e.history,
	})
	e.loop.Handle(runtime.Compute, core.Reconcile)
	e.loop.Handle(runtime.Pipeline, e.pipelines.Reconcile)
	e.loop.Handle(runtime.Endpoint, e.endpoints.Reconcile)
	return e, nil
}

// Start adopts what a previous run left (live nodes and their tasks), releases orphans,
// and then, unless the engine is manual, runs the work loop until ctx ends. A manual
// engine does nothing until Settle.
func (e *Engine) Start(ctx context.Context) error {
	if e.driver == nil {
		return errors.New("engine has no node driver")
	}
	e.driver = route.New(ctx, e.driver, e.routes)
	e.watchDriver()
	e.nodes.Start(e.driver)
	e.tasks.Start(ctx, e.driver)
	e.core.Start(ctx)
	e.endpoints.Start(ctx)
	if err := e.pruneIdempotency(); err != nil {
		return err
	}
	if err := e.nodes.Recover(ctx, e.core, e.endpoints); err != nil {
		return fmt.Errorf("recovering after restart: %w", err)
	}
	e.loop.Go(e.envs.Collect)
	e.loop.Go(e.collectArtifacts)
	e.resumePipelines()
	e.resumeSchedules()
	if !e.manual {
		go e.loop.Run(ctx)
		go e.history.Run(ctx, e.clock, e.HistorySample, e.log.Named("history"))
	}
	return nil
}

// pruneIdempotency forgets create keys older than model.IdempotencyTTL, so they do not
// pile up for the store's lifetime.
func (e *Engine) pruneIdempotency() error {
	var pruned int
	err := e.store.Update(func(tx *store.Tx) error {
		var err error
		pruned, err = model.PruneIdempotency(tx, e.clock.Now())
		return err
	})
	if err != nil {
		return fmt.Errorf("pruning old idempotency keys: %w", err)
	}
	if pruned > 0 {
		e.log.Info("pruned old idempotency keys", "count", pruned, "older_than", model.IdempotencyTTL)
	}
	return nil
}

// envCacheDir is where the local nodes of this machine keep built environments: one cache
// per machine, in the engine's data dir (DESIGN 8). Other drivers' nodes build in their own.
func envCacheDir(cfg Config) string {
	if cfg.NodesDriver != "local" || cfg.DataDir == "" {
		return ""
	}
	return filepath.Join(cfg.DataDir, "envs")
}

// gpusOf is the machine's GPUs that local nodes get: none when nodes are not local.
func gpusOf(cfg Config) []string {
	if cfg.NodesDriver != "local" {
		return nil
	}
	return cfg.GPUs
}

// randomID is the default ID source: 10 hex digits from crypto/rand.
func randomID(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// Artifacts returns the store of job outputs (nil when Config gave none).
func (e *Engine) Artifacts() *artifacts.Store { return e.artifacts }

// ArtifactUsage returns the bytes and blobs the store of job outputs holds, for /metrics.
func (e *Engine) ArtifactUsage() (bytes int64, blobs int) {
	if e.artifacts == nil {
		return 0, 0
	}
	return e.artifacts.Usage()
}

// SetRecorder gives the engine's metrics the node lifecycle's durations (node create and
// release times, idle-release lateness). Call it before Start.
func (e *Engine) SetRecorder(r metrics.Recorder) { e.core.SetRecorder(r) }

// SetEndpointMetrics gives the endpoint autoscaler's measures (decisions, hold times, cold
// starts) to the engine's metrics. Call it before Start.
func (e *Engine) SetEndpointMetrics(m endpoints.Metrics) { e.endpoints.SetMetrics(m) }

// Status describes the engine.
func (e *Engine) Status() api.Status {
	gpus, err := e.core.GPUs()
	if err != nil {
		e.log.Warn("listing the nodes holding GPUs failed", "error", err)
	}
	return api.Status{
		GPUs:        gpus,
		Version:     e.version,
		PID:         os.Getpid(),
		NodesDriver: e.nodesDriver,
		Locations:   append([]string(nil), e.locations...),
		DataDir:     e.dataDir,
		StartedAt:   e.startedAt,
		ScoringURL:  e.scoring.BaseURL(),

		MinIdleTimeBeforeShutdown: validation.FormatDuration(e.minIdleShutdown),
	}
}

// Locations lists the locations this engine serves.
func (e *Engine) Locations() []string { return append([]string(nil), e.locations...) }

// HasWork reports whether the engine manages anything that needs it to stay up: a node,
// instance, endpoint or job running or queued, or an enabled schedule. Workspaces alone are
// records, not work, so an engine holding only workspaces may exit when idle.
func (e *Engine) HasWork() bool {
	var endpoints bool
	_ = e.store.View(func(tx *store.Tx) error {
		endpoints = len(tx.Keys(store.Endpoints, "")) > 0
		return nil
	})
	return endpoints || e.core.HasWork() || e.hasEnabledSchedule()
}

// ownNodesRunContainers says whether the engine's own nodes run tasks in container images:
// local nodes with a containerd, Slurm nodes with a container runner, and pods (an image
// archive is imported into a node's containerd by the container runner: without one, a
// task of an archive fails at its start, naming why).
func ownNodesRunContainers(cfg Config) bool {
	switch cfg.NodesDriver {
	case "local":
		return cfg.ContainerdAddress != ""
	case "slurm":
		return cfg.Containers != nil
	case "kubernetes":
		return true
	}
	return false
}

// collectArtifacts removes the blobs no job references, once at start: what an intake
// the engine was killed in wrote goes here.
func (e *Engine) collectArtifacts() {
	if _, _, err := e.jobs.CollectArtifacts(); err != nil {
		e.log.Error("collecting artifacts failed", "error", err)
	}
}
