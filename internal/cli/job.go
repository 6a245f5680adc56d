package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/jobfile"
)

func newJobCommand(g *globals) *cobra.Command {
	job := &cobra.Command{Use: "job", Short: "Submit and follow training jobs"}
	job.AddCommand(newJobSubmitCommand(g), newJobListCommand(g), newJobShowCommand(g), newJobLogsCommand(g), newJobCancelCommand(g),
		newJobDownloadCommand(g), newJobDeleteCommand(g), newJobRerunCommand(g))
	return job
}

func newJobSubmitCommand(g *globals) *cobra.Command {
	var (
		ws     string
		f      submitFlags
		stream bool
	)
	cmd := &cobra.Command{
		Use:   "submit [-f job.yaml] --workspace W --compute C [--instance-type NAME] [--environment NAME] [--code DIR] [--instance-count N] [--env K=V]... [--stream] -- COMMAND...",
		Short: "Queue a job; the compute scales up at once. Prints the job ID, or with --stream its output",
		Long: "Queue a job on a compute cluster (or --compute serverless --instance-type SIZE for nodes made " +
			"for the job alone, or on an attached Kubernetes compute, where it runs as --instance-count pods of " +
			"--instance-type, one of the compute's instance types (its default_instance_type when not given), " +
			"deleted when the job ends). --code uploads a snapshot of DIR, honouring .amlignore (else .gitignore), " +
			"limited to 300 MiB and 2000 files. Each of the N nodes runs COMMAND with RANK, NODE_RANK, " +
			"LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and MLCOMPUTE_JOB_ID set. With --stream the command follows rank 0's " +
			"output and exits with the job's exit code. --environment runs it in an environment of the " +
			"workspace (an mlcompute_environment): built on each node the first time, its interpreter first on PATH.\n\n" +
			"-f reads an Azure ML v2 job's YAML: a command job (type: command) with its code, command (run by sh -c), " +
			"compute, environment, resources, environment_variables, inputs, outputs and names. Paths in it are " +
			"relative to the file. Flags given beside -f override the file, and a command after -- replaces its command. " +
			"A pipeline job's YAML (type: pipeline) submits the pipeline: its steps run as jobs of their own.",
		Example: "  mlcompute job submit --workspace lab --compute cpu --code . -- python train.py --epochs 3\n" +
			"  mlcompute job submit --workspace lab --compute cpu --instance-count 2 --stream -- torchrun train.py\n" +
			"  mlcompute job submit --workspace lab -f job.yaml --compute gpu --stream",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && f.file == "" {
				return fmt.Errorf("no command to run: give the job's command after --, for example\n\n" +
					"  mlcompute job submit --workspace lab --compute cpu -- python train.py --epochs 3\n\n" +
					"Everything after -- is the command and its arguments, run on every node; or give -f job.yaml")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.file != "" {
				p, err := pipelineFile(f.file)
				if err != nil {
					return err
				}
				if p != nil {
					if err := refusePipelineFlags(cmd, args); err != nil {
						return err
					}
					c, err := g.workspaceClient(cmd.Context(), ws, "")
					if err != nil {
						return err
					}
					return submitPipeline(cmd, c, ws, f.file, p, stream)
				}
			}
			spec := api.JobSpec{Compute: f.compute, InstanceType: f.instanceType, InstanceCount: f.count, Command: args, Env: map[string]string{}, Environment: f.environment}
			code := f.code
			var uploads map[string]string
			if f.file != "" {
				var err error
				if spec, code, uploads, err = jobFromFile(cmd, f, args); err != nil {
					return err
				}
			}
			if spec.Compute == "" {
				return fmt.Errorf("--compute is required (or compute: in the job's YAML): a compute cluster's name, or serverless")
			}
			for _, kv := range f.env {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--env %q must be KEY=VALUE", kv)
				}
				spec.Env[k] = v
			}
			ctx := cmd.Context()
			c, err := g.workspaceClient(ctx, ws, "")
			if err != nil {
				return err
			}
			if code != "" {
				if spec.SnapshotID, err = jobfile.UploadCode(ctx, c, ws, code); err != nil {
					return err
				}
			}
			if err := jobfile.UploadInputs(ctx, c, ws, &spec, uploads); err != nil {
				return err
			}
			job, err := c.SubmitJob(ctx, ws, spec)
			if err != nil {
				return err
			}
			if !stream {
				fmt.Fprintln(cmd.OutOrStdout(), job.ID)
				return nil
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "job %s queued on %s\n", job.ID, spec.Compute)
			// The status changes go to stderr beside the output, not before it: the output
			// stream is open from the start, so its first byte is never held up by a look
			// at the status.
			statusCtx, stopStatus := context.WithCancel(ctx)
			statusDone := make(chan struct{})
			go func() {
				defer close(statusDone)
				_ = followStatus(statusCtx, c, ws, job, cmd)
			}()
			final, err := follow(ctx, c, ws, job.ID, 0, cmd)
			stopStatus()
			<-statusDone
			if err != nil {
				return err
			}
			return exitWith(cmd, final)
		},
	}
	addWorkspaceFlag(cmd, &ws)
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "an Azure ML v2 command job's YAML; flags given beside it override it")
	fl.StringVar(&f.compute, "compute", "", "compute cluster name, or serverless")
	fl.StringVar(&f.instanceType, "instance-type", "", "VM size for --compute serverless, or an instance type of an attached Kubernetes compute")
	fl.StringVar(&f.code, "code", "", "directory to snapshot and run the command in")
	fl.Int64Var(&f.count, "instance-count", 1, "number of nodes")
	fl.StringArrayVar(&f.env, "env", nil, "environment variable KEY=VALUE (repeatable)")
	fl.StringVar(&f.environment, "environment", "", "environment of the workspace to run in (its interpreter first on PATH)")
	fl.BoolVar(&stream, "stream", false, "follow the output and exit with the job's exit code")
	return cmd
}

// follow prints a rank's output as the engine streams it until the job ends, then
// returns the job.
func follow(ctx context.Context, c *client.Client, ws, id string, rank int, cmd *cobra.Command) (*api.Job, error) {
	if _, err := c.FollowJobLogs(ctx, ws, id, rank, 0, cmd.OutOrStdout()); err != nil {
		return nil, err
	}
	return c.GetJob(ctx, ws, id)
}

// exitWith turns a finished job into the command's exit status.
func exitWith(cmd *cobra.Command, j *api.Job) error {
	switch {
	case j.Status == api.JobCompleted:
		return nil
	case j.ExitCode != nil:
		fmt.Fprintf(cmd.ErrOrStderr(), "job %s %s with exit code %d\n", j.ID, strings.ToLower(j.Status), *j.ExitCode)
		return exitCode(*j.ExitCode)
	default:
		fmt.Fprintf(cmd.ErrOrStderr(), "job %s %s: %s\n", j.ID, strings.ToLower(j.Status), j.Error)
		return exitCode(1)
	}
}

func newJobListCommand(g *globals) *cobra.Command {
	var ws, output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a workspace's jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, output)
			if err != nil {
				return err
			}
			jobs, err := c.ListJobs(cmd.Context(), ws)
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), api.JobList{Jobs: jobs})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tCOMPUTE\tSTATUS\tEXIT\tNODES\tSUBMITTED")
			for _, j := range jobs {
				exit := "-"
				if j.ExitCode != nil {
					exit = fmt.Sprint(*j.ExitCode)
				}
				compute := j.Compute
				if j.Type == api.JobTypePipeline {
					compute = "(pipeline)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", j.ID, compute, j.Status, exit, j.Count, j.SubmittedAt.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	addWorkspaceFlag(cmd, &ws)
	addOutputFlag(cmd, &output)
	return cmd
}

func newJobShowCommand(g *globals) *cobra.Command {
	var ws, output, explain string
	cmd := &cobra.Command{
		Use:   "show JOB",
		Short: "Show a job's status, exit code, compute and nodes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, output)
			if err != nil {
				return err
			}
			j, err := c.GetJob(cmd.Context(), ws, args[0])
			if err != nil {
				return err
			}
			if explain != "" {
				return explainStep(cmd.Context(), c, ws, j, explain, cmd.OutOrStdout())
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), j)
			}
			w := cmd.OutOrStdout()
			if warning := allReusedWarning(j); warning != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), warning)
			}
			if j.Type == api.JobTypePipeline {
				printPipeline(w, j)
				return nil
			}
			fmt.Fprintf(w, "job:     %s\ncompute: %s\nstatus:  %s\n", j.ID, j.Compute, j.Status)
			if j.ExitCode != nil {
				fmt.Fprintf(w, "exit:    %d\n", *j.ExitCode)
			}
			if j.Error != "" {
				fmt.Fprintf(w, "error:   %s\n", j.Error)
			}
			if j.Reason != "" {
				fmt.Fprintf(w, "reason:  %s\n", j.Reason)
			}
			if j.Environment != "" {
				fmt.Fprintf(w, "environment: %s (content hash %s)\n", j.Environment, j.EnvironmentHash)
			}
			if j.SubmittedBy != "" {
				fmt.Fprintf(w, "submitted by: %s\n", j.SubmittedBy)
			}
			if j.Schedule != "" {
				fmt.Fprintf(w, "schedule: %s\n", j.Schedule)
			}
			fmt.Fprintf(w, "nodes:   %s\ncommand: %s\n", strings.Join(j.Nodes, ", "), strings.Join(j.Command, " "))
			printJobIO(w, j)
			return nil
		},
	}
	addWorkspaceFlag(cmd, &ws)
	addOutputFlag(cmd, &output)
	cmd.Flags().StringVar(&explain, "explain", "", "for a pipeline job: the reuse key's parts of step STEP, and which differ from the last run of that step name")
	return cmd
}

func newJobLogsCommand(g *globals) *cobra.Command {
	var (
		ws        string
		rank      int
		following bool
	)
	cmd := &cobra.Command{
		Use:   "logs JOB",
		Short: "Print a job's output (rank 0 unless --rank); --follow waits for the end",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, "")
			if err != nil {
				return err
			}
			if following {
				_, err := follow(cmd.Context(), c, ws, args[0], rank, cmd)
				return err
			}
			chunk, err := c.JobLogs(cmd.Context(), ws, args[0], rank, 0)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(chunk.Data)
			return err
		},
	}
	addWorkspaceFlag(cmd, &ws)
	cmd.Flags().IntVar(&rank, "rank", 0, "which node's output")
	cmd.Flags().BoolVarP(&following, "follow", "f", false, "keep printing until the job ends")
	return cmd
}

func newJobCancelCommand(g *globals) *cobra.Command {
	var ws string
	cmd := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a job; its processes are killed and its nodes freed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, "")
			if err != nil {
				return err
			}
			j, err := c.CancelJob(cmd.Context(), ws, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s: %s\n", j.ID, j.Status)
			return nil
		},
	}
	addWorkspaceFlag(cmd, &ws)
	return cmd
}

// printJobIO lists a job's inputs and outputs, sorted by name.
func printJobIO(w io.Writer, j *api.Job) {
	for _, name := range slices.Sorted(maps.Keys(j.Inputs)) {
		in := j.Inputs[name]
		switch {
		case in.Value != nil:
			fmt.Fprintf(w, "input %s: %s\n", name, *in.Value)
		case in.Digest != "":
			fmt.Fprintf(w, "input %s: %s %s (%s, %d files, %d bytes, %s)\n", name, in.Type, in.Path, in.Mode, in.FileCount, in.Size, in.Digest)
		default:
			fmt.Fprintf(w, "input %s: %s %s (%s, snapshot %s)\n", name, in.Type, in.Path, in.Mode, in.SnapshotID)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(j.Outputs)) {
		out := j.Outputs[name]
		if out.Digest == "" {
			fmt.Fprintf(w, "output %s: %s (%s), not registered\n", name, out.Type, out.Mode)
			continue
		}
		fmt.Fprintf(w, "output %s: %s (%s), %d files, %d bytes, %s\n", name, out.Type, out.Mode, out.FileCount, out.Size, out.Digest)
	}
}
