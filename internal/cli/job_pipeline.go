package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/jobspec"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/reuse"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/jobfile"
)

// pipelineFile reads a job's YAML and returns its pipeline, or nil when it is a command job.
func pipelineFile(file string) (*jobspec.PipelineJob, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("-f: %w", err)
	}
	spec, err := jobspec.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return spec.Pipeline, nil
}

// submitPipeline submits a pipeline's YAML. Without --stream it prints the pipeline's
// ID; with it, each step's status as it changes, then the steps, and it exits non-zero
// unless the pipeline Completed.
func submitPipeline(cmd *cobra.Command, c *client.Client, ws, file string, p *jobspec.PipelineJob, stream bool) error {
	spec, up, err := jobfile.Pipeline(file, filepath.Dir(file), p)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if err := up.Upload(ctx, c, ws, &spec); err != nil {
		return err
	}
	j, err := c.SubmitJob(ctx, ws, spec)
	if err != nil {
		// The engine names the YAML path; give its line too.
		var apiErr *api.Error
		if errors.As(err, &apiErr) && p.Lines[apiErr.Field] > 0 {
			return fmt.Errorf("%s: line %d: %w", file, p.Lines[apiErr.Field], err)
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	if !stream {
		fmt.Fprintln(cmd.OutOrStdout(), j.ID)
		return nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "pipeline %s queued (%d steps)\n", j.ID, len(spec.Pipeline.Steps))
	seen := map[string]string{}
	ticker := time.NewTicker(statusPoll)
	defer ticker.Stop()
	for {
		if j, err = c.GetJob(ctx, ws, j.ID); err != nil {
			return err
		}
		for _, s := range j.Steps {
			if line := stepLine(s); seen[s.Name] != line {
				fmt.Fprintf(cmd.ErrOrStderr(), "step %s: %s\n", s.Name, line)
				seen[s.Name] = line
			}
		}
		if api.Terminal(j.Status) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
	printPipeline(cmd.OutOrStdout(), j)
	return exitWith(cmd, j)
}

// refusePipelineFlags refuses the flags that set a command job's fields beside a
// pipeline's file: its steps take theirs from the file.
func refusePipelineFlags(cmd *cobra.Command, args []string) error {
	for _, name := range []string{"compute", "instance-type", "instance-count", "environment", "code", "env"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s sets a command job's %s; a pipeline's steps take theirs from the file (jobs.<step>.*, settings.default_compute, settings.default_environment)", name, name)
		}
	}
	if len(args) > 0 {
		return fmt.Errorf("a command after -- replaces a command job's; a pipeline's steps take theirs from the file (jobs.<step>.command)")
	}
	return nil
}

// stepLine is a step's status with what explains it.
func stepLine(s api.PipelineStep) string {
	var extra []string
	if s.ReusedFrom != "" {
		extra = append(extra, "reused_from: "+s.ReusedFrom)
	}
	if s.Reason != "" {
		extra = append(extra, s.Reason)
	}
	if len(extra) == 0 {
		return s.Status
	}
	return s.Status + " (" + strings.Join(extra, "; ") + ")"
}

// printPipeline prints a pipeline job and its steps as a tree: each step under the
// upstream step it waits on longest, with its status, reused_from and duration.
// allReusedWarning is the warning for a scheduled pipeline run whose every step was
// reused (DESIGN 6): it ran nothing, which is right only if nothing it reads changed.
// Empty for any other job.
func allReusedWarning(j *api.Job) string {
	if j.Schedule == "" || j.Type != api.JobTypePipeline || len(j.Steps) == 0 {
		return ""
	}
	for _, s := range j.Steps {
		if s.ReusedFrom == "" {
			return ""
		}
	}
	return fmt.Sprintf("warning: every step of %s, a run of schedule %s, was reused: it ran nothing. "+
		"Reuse is keyed on the code, environment, inputs' content and step spec; if the run should have "+
		"read something new (data behind a URL, the time), set is_deterministic: false on that step or "+
		"settings.force_rerun: true.", j.ID, j.Schedule)
}

func printPipeline(w io.Writer, j *api.Job) {
	fmt.Fprintf(w, "job:     %s\ntype:    pipeline\nstatus:  %s\n", j.ID, j.Status)
	if j.Schedule != "" {
		fmt.Fprintf(w, "schedule: %s\n", j.Schedule)
	}
	if j.Error != "" {
		fmt.Fprintf(w, "error:   %s\n", j.Error)
	}
	printJobIO(w, j)
	fmt.Fprintln(w, "steps:")
	byName := map[string]api.PipelineStep{}
	for _, s := range j.Steps {
		byName[s.Name] = s
	}
	depth := map[string]int{}
	var depthOf func(name string, seen map[string]bool) int
	depthOf = func(name string, seen map[string]bool) int {
		if d, ok := depth[name]; ok || seen[name] {
			return d
		}
		seen[name] = true
		d := 0
		for _, up := range byName[name].Upstream {
			d = max(d, depthOf(up, seen)+1)
		}
		depth[name] = d
		return d
	}
	order := make([]api.PipelineStep, len(j.Steps))
	copy(order, j.Steps)
	for _, s := range order {
		depthOf(s.Name, map[string]bool{})
	}
	slices.SortStableFunc(order, func(a, b api.PipelineStep) int { return depth[a.Name] - depth[b.Name] })
	for _, s := range order {
		indent := strings.Repeat("   ", depth[s.Name])
		mark := ""
		if depth[s.Name] > 0 {
			mark = "└─ "
		}
		fields := []string{s.Status}
		if s.ReusedFrom != "" {
			fields = append(fields, "reused_from: "+s.ReusedFrom)
		}
		if d := stepDuration(s); d != "" {
			fields = append(fields, d)
		}
		if s.Job != "" {
			fields = append(fields, "job "+s.Job)
		}
		if len(s.Upstream) > 1 {
			fields = append(fields, "after "+strings.Join(s.Upstream, ", "))
		}
		if s.Reason != "" {
			fields = append(fields, s.Reason)
		}
		fmt.Fprintf(w, "  %s%s%s: %s\n", indent, mark, s.Name, strings.Join(fields, "  "))
	}
}

// stepDuration is how long a step ran, "" before it started.
func stepDuration(s api.PipelineStep) string {
	switch {
	case s.StartedAt == nil:
		return ""
	case s.EndedAt == nil:
		return "running"
	}
	return s.EndedAt.Sub(*s.StartedAt).Round(time.Millisecond).String()
}

// explainStep prints the parts of a pipeline step's reuse key next to those of the last
// earlier run of a step of that name (in the newest pipeline submitted before this one
// that ran or reused it), marking those that differ: why the step ran, or why it did not.
func explainStep(ctx context.Context, c *client.Client, ws string, j *api.Job, name string, w io.Writer) error {
	if j.Type != api.JobTypePipeline {
		return fmt.Errorf("--explain takes a pipeline job's step; %s is a command job", j.ID)
	}
	i := slices.IndexFunc(j.Steps, func(s api.PipelineStep) bool { return s.Name == name })
	if i < 0 {
		names := make([]string, len(j.Steps))
		for k, s := range j.Steps {
			names[k] = s.Name
		}
		return fmt.Errorf("pipeline %s has no step %q (steps: %s)", j.ID, name, strings.Join(names, ", "))
	}
	s := j.Steps[i]
	fmt.Fprintf(w, "step %s of %s: %s\n", name, j.ID, stepLine(s))
	switch {
	case s.KeyParts == nil:
		fmt.Fprintln(w, "no key yet: the step has not started")
		return nil
	case s.Key == "":
		fmt.Fprintf(w, "no key: %s could not be computed, so the step ran\n", s.KeyMissing)
	default:
		fmt.Fprintf(w, "key: %s\n", s.Key)
	}
	all, err := c.ListJobs(ctx, ws)
	if err != nil {
		return err
	}
	var last *api.PipelineStep
	lastFrom := ""
	for _, other := range all { // newest first
		if other.Type != api.JobTypePipeline || other.ID == j.ID || !other.SubmittedAt.Before(j.SubmittedAt) {
			continue
		}
		k := slices.IndexFunc(other.Steps, func(o api.PipelineStep) bool { return o.Name == name && o.KeyParts != nil })
		if k >= 0 {
			last, lastFrom = &other.Steps[k], other.ID+"/"+name
			break
		}
	}
	cur := reuse.Parts(*s.KeyParts)
	var prev *reuse.Parts
	if last != nil {
		p := reuse.Parts(*last.KeyParts)
		prev = &p
		fmt.Fprintf(w, "last run of %s: %s (key %s)\n", name, lastFrom, cmpOr(last.Key, "none"))
	} else {
		fmt.Fprintf(w, "no earlier run of a step named %s\n", name)
	}
	for _, comp := range reuse.Explain(cur, prev) {
		mark := " "
		if comp.Differs {
			mark = "*"
		}
		line := fmt.Sprintf("%s %s: %s", mark, comp.Name, shown(comp.Value))
		if comp.Differs && prev != nil {
			line += "  (last: " + shown(comp.Last) + ")"
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// shown is a key part as printed: an unknown part says so, an empty one is "-".
func shown(v string) string {
	switch v {
	case reuse.Unknown:
		return "(unknown)"
	case "":
		return "-"
	}
	return v
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func newJobRerunCommand(g *globals) *cobra.Command {
	var (
		ws, from string
		force    bool
	)
	cmd := &cobra.Command{
		Use:   "rerun PIPELINE [--from STEP] [--force]",
		Short: "Run a pipeline job's definition again, reusing steps by key; prints the new job's ID",
		Long: "Submit a new run of a pipeline job as it was submitted (its code and inputs as uploaded then). " +
			"Steps are reused by key as in any run; --from STEP runs STEP and every step after it anew, " +
			"--force runs every step anew.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, "")
			if err != nil {
				return err
			}
			j, err := c.RerunJob(cmd.Context(), ws, args[0], api.RerunRequest{From: from, Force: force})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), j.ID)
			return nil
		},
	}
	addWorkspaceFlag(cmd, &ws)
	cmd.Flags().StringVar(&from, "from", "", "run this step and every step after it anew")
	cmd.Flags().BoolVar(&force, "force", false, "run every step anew")
	return cmd
}
