// Package ui is the engine's read-only status page (DESIGN 9): static assets embedded in the
// binary (no build step, nothing fetched at run time) and the JSON snapshot the page polls.
// The server package serves both behind the API's authentication.
package ui

import (
	"context"
	"embed"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
)

//go:embed assets
var assets embed.FS

// Assets are the page's files: index.html, app.js and style.css.
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}

// Source is what the page reads; *engine.Engine satisfies it.
type Source interface {
	Status() api.Status
	ListWorkspaces(ctx context.Context) ([]api.Workspace, error)
	ListComputes(ctx context.Context, workspace string) ([]api.Compute, error)
	ListJobs(ctx context.Context, workspace string) ([]api.Job, error)
	JobLogs(ctx context.Context, workspace, id string, rank int, offset int64) ([]byte, int64, bool, error)
	ListEndpoints(ctx context.Context, workspace string) ([]api.Endpoint, error)
	ScoringStats(endpoint string) map[string]router.DeploymentStats
	ListEnvironments(ctx context.Context, workspace string) ([]api.Environment, error)
	History(ctx context.Context, workspace string) (*api.History, error)
}

// State is the body of GET /ui/api/state.
type State struct {
	Time       time.Time       `json:"time"`
	Engine     api.Status      `json:"engine"`
	Workspaces []WorkspaceView `json:"workspaces"`
}

// WorkspaceView is a workspace with what it holds, and the last hour of its computes and
// deployments (the page plots History).
type WorkspaceView struct {
	api.Workspace
	Computes     []api.Compute     `json:"computes"`
	Jobs         []JobView         `json:"jobs"`
	Pipelines    []api.Job         `json:"pipelines"`
	Endpoints    []EndpointView    `json:"endpoints"`
	Environments []EnvironmentView `json:"environments"`
	History      *api.History      `json:"history"`
}

// JobView is a job with the tail of its first rank's output.
type JobView struct {
	api.Job
	Log string `json:"log"`
}

// EndpointView is an endpoint with the router's counters per deployment; the page turns
// the request counters into rates between two polls.
type EndpointView struct {
	api.Endpoint
	Stats map[string]router.DeploymentStats `json:"stats"`
}

// Limits of what one snapshot carries.
const (
	// LogTail is how much of a job's output the page shows.
	LogTail = 8 << 10
	// FinishedJobs is how many ended jobs per workspace are shown after the active ones.
	FinishedJobs = 10
	// FinishedPipelines is how many ended pipelines per workspace are drawn after the
	// active ones (their steps' jobs would crowd them out of the jobs shown).
	FinishedPipelines = 5
)

// Builder makes snapshots. It remembers how far it read each job's output, so a poll
// reads only what is new.
type Builder struct {
	src Source

	mu    sync.Mutex
	tails map[string]*logTail // job ID -> output read so far
}

type logTail struct {
	offset int64
	data   []byte
	done   bool
}

// NewBuilder returns a Builder reading src.
func NewBuilder(src Source) *Builder {
	return &Builder{src: src, tails: map[string]*logTail{}}
}

// Build reads the engine's state now.
func (b *Builder) Build(ctx context.Context, now time.Time) (*State, error) {
	st := &State{Time: now.UTC(), Engine: b.src.Status(), Workspaces: []WorkspaceView{}}
	workspaces, err := b.src.ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	shown := map[string]bool{}
	for _, ws := range workspaces {
		v := WorkspaceView{Workspace: ws, Computes: []api.Compute{}, Jobs: []JobView{}, Endpoints: []EndpointView{}}
		computes, err := b.src.ListComputes(ctx, ws.Name)
		if err != nil {
			return nil, err
		}
		v.Computes = append(v.Computes, computes...) // [] rather than null for none
		jobs, err := b.src.ListJobs(ctx, ws.Name)
		if err != nil {
			return nil, err
		}
		var pipelines []api.Job
		for _, j := range jobs {
			if j.Type == api.JobTypePipeline {
				pipelines = append(pipelines, j)
			}
		}
		v.Pipelines = selectJobs(pipelines, FinishedPipelines)
		for _, j := range selectJobs(jobs, FinishedJobs) {
			shown[j.ID] = true
			v.Jobs = append(v.Jobs, JobView{Job: j, Log: b.logTail(ctx, j)})
		}
		eps, err := b.src.ListEndpoints(ctx, ws.Name)
		if err != nil {
			return nil, err
		}
		for _, ep := range eps {
			v.Endpoints = append(v.Endpoints, EndpointView{Endpoint: ep, Stats: b.src.ScoringStats(ep.Name)})
		}
		envs, err := b.src.ListEnvironments(ctx, ws.Name)
		if err != nil {
			return nil, err
		}
		v.Environments = environmentViews(envs, jobs)
		if v.History, err = b.src.History(ctx, ws.Name); err != nil {
			return nil, err
		}
		st.Workspaces = append(st.Workspaces, v)
	}
	b.mu.Lock()
	for id := range b.tails {
		if !shown[id] {
			delete(b.tails, id)
		}
	}
	b.mu.Unlock()
	return st, nil
}

// selectJobs keeps the active jobs (oldest first) and the ended most recently submitted
// ones, at most ended of them.
func selectJobs(jobs []api.Job, ended int) []api.Job {
	var active, done []api.Job
	for _, j := range jobs {
		if api.Terminal(j.Status) {
			done = append(done, j)
		} else {
			active = append(active, j)
		}
	}
	slices.SortStableFunc(active, func(a, b api.Job) int { return a.SubmittedAt.Compare(b.SubmittedAt) })
	slices.SortStableFunc(done, func(a, b api.Job) int { return b.SubmittedAt.Compare(a.SubmittedAt) })
	if len(done) > ended {
		done = done[:ended]
	}
	return append(append([]api.Job{}, active...), done...)
}

// logTail reads what is new in a job's first rank's output and returns its last LogTail
// bytes. A read error leaves the tail as it was: the page is best effort.
func (b *Builder) logTail(ctx context.Context, j api.Job) string {
	b.mu.Lock()
	t := b.tails[j.ID]
	if t == nil {
		t = &logTail{}
		b.tails[j.ID] = t
	}
	offset, done := t.offset, t.done
	b.mu.Unlock()
	if done || j.Status == api.JobQueued {
		return b.tailString(j.ID)
	}
	data, next, complete, err := b.src.JobLogs(ctx, j.Workspace, j.ID, 0, offset)
	if err != nil {
		return b.tailString(j.ID)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.offset == offset { // no concurrent poll advanced it meanwhile
		t.data = append(t.data, data...)
		if len(t.data) > LogTail {
			t.data = append([]byte(nil), t.data[len(t.data)-LogTail:]...)
		}
		t.offset, t.done = next, complete
	}
	return string(t.data)
}

func (b *Builder) tailString(id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.tails[id]; t != nil {
		return string(t.data)
	}
	return ""
}
