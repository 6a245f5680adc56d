package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

// statusPoll is how often `job submit --stream` looks at a job that has not started yet.
const statusPoll = 250 * time.Millisecond

// followStatus prints a submitted job's status on stderr each time it or its reason
// changes (Queued while the compute gets nodes, with the nodes' pending reason; Preparing
// on its nodes; Running), until the job runs or ends. Its output is followed next (a job
// that ran and ended between two looks still has all its output there).
//
// The first look is one poll after the submission, not at once: the submission already
// said the job is queued, and a job on a cluster at zero nodes is usually running by then.
// Asking the engine about the compute meanwhile would take CPU from the scale-up that the
// job's first byte of output waits for.
func followStatus(ctx context.Context, c *client.Client, ws string, job *api.Job, cmd *cobra.Command) error {
	last := ""
	ticker := time.NewTicker(statusPoll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
		var err error
		if job, err = c.GetJob(ctx, ws, job.ID); err != nil {
			return err
		}
		line := statusLine(ctx, c, ws, job)
		if line != last {
			fmt.Fprintf(cmd.ErrOrStderr(), "job %s: %s\n", job.ID, line)
			last = line
		}
		if job.Status == api.JobRunning || api.Terminal(job.Status) {
			return nil
		}
	}
}

// statusLine describes a job's status with why it waits: the engine's reason for the job,
// else the pending reasons of the compute's preparing nodes (its own once it has some).
func statusLine(ctx context.Context, c *client.Client, ws string, j *api.Job) string {
	switch j.Status {
	case api.JobRunning:
		return fmt.Sprintf("Running on %s", strings.Join(j.Nodes, ", "))
	case api.JobQueued, api.JobPreparing:
	default:
		return j.Status
	}
	var why []string
	if j.Status == api.JobPreparing {
		why = append(why, "starting on "+strings.Join(j.Nodes, ", "))
	}
	if j.Reason != "" {
		why = append(why, j.Reason)
	} else if r := nodeReasons(ctx, c, ws, j); r != "" {
		why = append(why, r)
	}
	if len(why) == 0 {
		return j.Status
	}
	return j.Status + " (" + strings.Join(why, "; ") + ")"
}

// nodeReasons says how many of the job's compute's nodes are preparing and their pending
// reasons, or "" when none is (or the compute cannot be read: a serverless job's compute
// has another name).
func nodeReasons(ctx context.Context, c *client.Client, ws string, j *api.Job) string {
	comp, err := c.GetCompute(ctx, ws, j.Compute)
	if err != nil {
		return ""
	}
	mine := map[string]bool{}
	for _, id := range j.Nodes {
		mine[id] = true
	}
	preparing, reasons := 0, map[string]bool{}
	for _, n := range comp.Nodes {
		if n.State != api.NodePreparing || (len(mine) > 0 && !mine[n.ID]) {
			continue
		}
		preparing++
		if n.Reason != "" {
			reasons[n.Reason] = true
		}
	}
	if preparing == 0 {
		return ""
	}
	out := fmt.Sprintf("%d node(s) of %s preparing", preparing, comp.Name)
	if len(reasons) > 0 {
		list := make([]string, 0, len(reasons))
		for r := range reasons {
			list = append(list, r)
		}
		sort.Strings(list)
		out += ": " + strings.Join(list, ", ")
	}
	return out
}
