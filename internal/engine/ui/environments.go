package ui

import (
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
)

// An environment is built on a node when a job that names it starts there (DESIGN 8), once
// per content hash and machine: what the engine records of a build is the job that
// prepared it (its status, its reason "building environment" while it builds, its error
// when the build failed). The page shows each content hash the workspace's jobs used, with
// what those jobs say of it.

// Build states.
const (
	BuildBuilding = "building" // a job prepares it on its nodes now
	BuildReady    = "ready"    // the newest job past preparation ran in it
	BuildFailed   = "failed"   // the newest job's preparation failed
	BuildNone     = "not built"
)

// EnvironmentView is an environment with its builds, the current content hash first.
type EnvironmentView struct {
	api.Environment
	Builds []BuildView `json:"builds"`
}

// BuildView is what the jobs of a workspace say about one content hash of an environment.
type BuildView struct {
	ContentHash string `json:"content_hash"`
	// Current is true for the environment's content hash now; an older hash is shown while
	// jobs that used it are listed.
	Current bool   `json:"current"`
	State   string `json:"state"`
	// Nodes are the nodes where jobs ran in it (at most MaxBuildNodes).
	Nodes []string `json:"nodes"`
	// Jobs counts the jobs submitted with it (reused pipeline steps, which ran nothing, left
	// out); LastJob is the newest of them.
	Jobs          int    `json:"jobs"`
	LastJob       string `json:"last_job,omitempty"`
	LastJobStatus string `json:"last_job_status,omitempty"`
	// Error is the failed build's error (the job's, with pip's last lines).
	Error string `json:"error,omitempty"`
}

// MaxBuildNodes bounds the nodes listed per build.
const MaxBuildNodes = 8

// environmentViews pairs each environment with the builds its jobs record.
func environmentViews(envs []api.Environment, jobs []api.Job) []EnvironmentView {
	byEnv := map[string][]api.Job{}
	for _, j := range jobs {
		// A reused pipeline step ran nothing: it says nothing of a build.
		if j.Environment != "" && j.EnvironmentHash != "" && j.ReusedFrom == "" {
			byEnv[j.Environment] = append(byEnv[j.Environment], j)
		}
	}
	out := make([]EnvironmentView, 0, len(envs))
	for _, e := range envs {
		js := byEnv[e.Name]
		// Newest first: the builds' order (current, then by newest use) and each one's verdict.
		slices.SortStableFunc(js, func(a, b api.Job) int { return b.SubmittedAt.Compare(a.SubmittedAt) })
		v := EnvironmentView{Environment: e, Builds: []BuildView{{ContentHash: e.ContentHash, Current: true, State: BuildNone, Nodes: []string{}}}}
		index := map[string]int{e.ContentHash: 0}
		for _, j := range js {
			i, ok := index[j.EnvironmentHash]
			if !ok {
				i = len(v.Builds)
				index[j.EnvironmentHash] = i
				v.Builds = append(v.Builds, BuildView{ContentHash: j.EnvironmentHash, State: BuildNone, Nodes: []string{}})
			}
			addJob(&v.Builds[i], j)
		}
		out = append(out, v)
	}
	return out
}

// addJob adds one job (jobs come newest first) to what is known of its build.
func addJob(b *BuildView, j api.Job) {
	b.Jobs++
	if b.LastJob == "" {
		b.LastJob, b.LastJobStatus = j.ID, j.Status
	}
	state := ""
	switch {
	case j.Status == api.JobPreparing && (j.Reason == computes.ReasonBuilding || j.Reason == computes.ReasonChecking):
		state = BuildBuilding
	case j.Status == api.JobRunning || j.Status == api.JobCompleted:
		state = BuildReady
		for _, n := range j.Nodes {
			if len(b.Nodes) < MaxBuildNodes && !slices.Contains(b.Nodes, n) {
				b.Nodes = append(b.Nodes, n)
			}
		}
	case j.Status == api.JobFailed && preparationFailed(j.Error):
		state = BuildFailed
	}
	switch {
	case state == BuildBuilding:
		b.State = BuildBuilding // a build now wins over any verdict
	case state != "" && b.State == BuildNone:
		b.State = state // the newest verdict
		if state == BuildFailed {
			b.Error = j.Error
		}
	}
}

// preparationFailed reports whether a failed job's error is its environment's preparation
// failing (the jobs controller's words): a build, or an interpreter's check.
func preparationFailed(err string) bool {
	return strings.HasPrefix(err, "building environment ") || strings.HasPrefix(err, "checking the interpreter ")
}
