package metrics

import (
	"context"
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

var (
	nodesDesc = prometheus.NewDesc(Namespace+"_nodes",
		"Nodes of each compute by state (idle, running, preparing, leaving, unusable, preempted).",
		[]string{"workspace", "compute", "state"}, nil)
	jobsDesc = prometheus.NewDesc(Namespace+"_jobs",
		"Jobs the engine holds by workspace, compute and status (Queued, Preparing, Running, Completed, Failed, Canceled).",
		[]string{"workspace", "compute", "status"}, nil)
	scrapeErrorsDesc = prometheus.NewDesc(Namespace+"_state_scrape_errors",
		"1 when reading the engine's state for this scrape failed (the state families are then incomplete), else 0.",
		nil, nil)
)

// NodeStates and JobStatuses are every value the state label takes; each compute reports
// all of them, zeros included, so a dashboard's series never disappear.
var (
	NodeStates  = []string{api.NodeIdle, api.NodeRunning, api.NodePreparing, api.NodeLeaving, api.NodeUnusable, api.NodePreempted}
	JobStatuses = []string{api.JobQueued, api.JobPreparing, api.JobRunning, api.JobCompleted, api.JobFailed, api.JobCanceled}
)

// stateCollector reads nodes and jobs from the engine at scrape time, so the numbers are
// the store's, never a second copy that could drift.
type stateCollector struct {
	src Source
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodesDesc
	ch <- jobsDesc
	ch <- scrapeErrorsDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx := context.Background()
	failed := 0.0
	workspaces, err := c.src.ListWorkspaces(ctx)
	if err != nil {
		failed = 1
	}
	for _, ws := range workspaces {
		computes, err := c.src.ListComputes(ctx, ws.Name)
		if err != nil {
			failed = 1
			continue
		}
		jobs, err := c.src.ListJobs(ctx, ws.Name)
		if err != nil {
			failed = 1
		}
		jobCounts := map[string]map[string]int{}
		for _, cp := range computes {
			counts := map[string]int{}
			for _, n := range cp.Nodes {
				counts[n.State]++
			}
			for _, st := range NodeStates {
				ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(counts[st]), ws.Name, cp.Name, st)
			}
			jobCounts[cp.Name] = map[string]int{}
		}
		for _, j := range jobs {
			if jobCounts[j.Compute] == nil {
				jobCounts[j.Compute] = map[string]int{}
			}
			jobCounts[j.Compute][j.Status]++
		}
		names := make([]string, 0, len(jobCounts))
		for name := range jobCounts {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			for _, st := range JobStatuses {
				ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(jobCounts[name][st]), ws.Name, name, st)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorsDesc, prometheus.GaugeValue, failed)
}
