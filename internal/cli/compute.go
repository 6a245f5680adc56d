package cli

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

// addWorkspaceFlag adds the --workspace flag every compute and job verb takes.
func addWorkspaceFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "workspace", os.Getenv("MLCOMPUTE_WORKSPACE"), "workspace name (env MLCOMPUTE_WORKSPACE)")
}

// workspaceClient checks what every workspace verb shares (--workspace set, a known
// --output when the verb has one) and connects to the engine.
func (g *globals) workspaceClient(ctx context.Context, ws, output string) (*client.Client, error) {
	if ws == "" {
		return nil, fmt.Errorf("--workspace is required (or set MLCOMPUTE_WORKSPACE)")
	}
	if output != "" {
		if err := checkOutput(output); err != nil {
			return nil, err
		}
	}
	return g.connect(ctx)
}

func newComputeCommand(g *globals) *cobra.Command {
	compute := &cobra.Command{Use: "compute", Short: "Show compute targets and their nodes; start and stop instances"}
	compute.AddCommand(newComputeListCommand(g), newComputeShowCommand(g),
		newInstanceActionCommand(g, api.ActionStart, "Start a compute instance (its startup script runs)"),
		newInstanceActionCommand(g, api.ActionStop, "Stop a compute instance (its jobs are canceled)"),
		newInstanceActionCommand(g, api.ActionRestart, "Restart a compute instance on a fresh node"),
		newComputeExecCommand(g), newReportActivityCommand(g))
	return compute
}

func newComputeListCommand(g *globals) *cobra.Command {
	var ws, output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a workspace's computes with their node counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, output)
			if err != nil {
				return err
			}
			list, err := c.ListComputes(cmd.Context(), ws)
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), api.ComputeList{Computes: list})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTYPE\tVM_SIZE\tSTATE\tNODES\tMIN\tMAX\tIDLE\tRUNNING\tPREPARING\tLEAVING")
			for _, cp := range list {
				lo, hi := int64(0), int64(0)
				if cp.ScaleSettings != nil {
					lo, hi = cp.ScaleSettings.MinNodeCount, cp.ScaleSettings.MaxNodeCount
				}
				size := cp.VMSize
				if vm := cp.VirtualMachine; vm != nil {
					lo, hi = 1, 1 // the machine itself: one node that never scales
					size = fmt.Sprintf("%s@%s (%d vCPUs)", vm.Username, vm.Address, vm.VCPUs)
				}
				if k := cp.Kubernetes; k != nil {
					size = fmt.Sprintf("namespace %s (%d vCPUs)", k.Namespace, k.VCPUs) // pods per job: no min or max
				}
				n := cp.NodeStateCounts
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", cp.Name, cp.Type, size, cp.State,
					cp.CurrentNodeCount, lo, hi, n.Idle, n.Running, n.Preparing, n.Leaving)
			}
			return tw.Flush()
		},
	}
	addWorkspaceFlag(cmd, &ws)
	addOutputFlag(cmd, &output)
	return cmd
}

func newComputeShowCommand(g *globals) *cobra.Command {
	var ws, output string
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a compute, its state and each node's state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, output)
			if err != nil {
				return err
			}
			cp, err := c.GetCompute(cmd.Context(), ws, args[0])
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), cp)
			}
			w := cmd.OutOrStdout()
			if vm := cp.VirtualMachine; vm != nil {
				fmt.Fprintf(w, "%s (%s, %s@%s port %d)\n", cp.ID, cp.Type, vm.Username, vm.Address, vm.SSHPort)
				fmt.Fprintf(w, "machine: %d vCPUs, %.2f GiB memory, host key %s\n", vm.VCPUs, vm.MemoryGB, vm.HostKeyFingerprint)
			} else if k := cp.Kubernetes; k != nil {
				kctx := k.Context
				if kctx == "" {
					kctx = "the kubeconfig's current context"
				}
				fmt.Fprintf(w, "%s (%s, namespace %s, %s)\n", cp.ID, cp.Type, k.Namespace, kctx)
				fmt.Fprintf(w, "nodes its instance types can use: %d vCPUs, %.2f GiB memory allocatable\n", k.VCPUs, k.MemoryGB)
				for _, name := range slices.Sorted(maps.Keys(k.InstanceTypes)) {
					it, mark := k.InstanceTypes[name], ""
					if name == k.DefaultInstanceType {
						mark = " (default)"
					}
					var req, lim map[string]string
					if it.Resources != nil {
						req, lim = it.Resources.Requests, it.Resources.Limits
					}
					fmt.Fprintf(w, "instance type %s%s: node_selector %v, requests %v, limits %v\n", name, mark, it.NodeSelector, req, lim)
				}
			} else {
				fmt.Fprintf(w, "%s (%s, %s)\n", cp.ID, cp.Type, cp.VMSize)
			}
			fmt.Fprintf(w, "state: %s, allocation: %s, nodes: %d current, %d target\n", cp.State, cp.AllocationState, cp.CurrentNodeCount, cp.TargetNodeCount)
			if s := cp.ScaleSettings; s != nil {
				fmt.Fprintf(w, "scale: min %d, max %d, idle nodes released after %s\n", s.MinNodeCount, s.MaxNodeCount, s.ScaleDownNodesAfterIdleDuration)
			}
			for _, e := range cp.Errors {
				fmt.Fprintf(w, "error: %s %s: %s\n", e.Time.Format(time.RFC3339), e.Code, e.Message)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tSTATE\tJOB\tREASON")
			for _, n := range cp.Nodes {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.ID, n.State, dash(n.JobID), dash(n.Reason))
			}
			return tw.Flush()
		},
	}
	addWorkspaceFlag(cmd, &ws)
	addOutputFlag(cmd, &output)
	return cmd
}

// newInstanceActionCommand builds compute start, stop and restart.
func newInstanceActionCommand(g *globals, action, short string) *cobra.Command {
	var ws string
	cmd := &cobra.Command{
		Use:   action + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, "")
			if err != nil {
				return err
			}
			cp, err := c.InstanceAction(cmd.Context(), ws, args[0], action)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s (%s requested)\n", cp.ID, cp.State, action)
			return nil
		},
	}
	addWorkspaceFlag(cmd, &ws)
	return cmd
}

func newComputeExecCommand(g *globals) *cobra.Command {
	var ws string
	cmd := &cobra.Command{
		Use:   "exec --workspace W NAME -- COMMAND...",
		Short: "Run a command in a session on a running compute instance; the session keeps it awake",
		Long: "Run a command on a compute instance with this terminal's input and output, in the " +
			"node's home directory. While the session is open the instance counts as active, so " +
			"idle shutdown waits. The command's exit status becomes this command's.",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, "")
			if err != nil {
				return err
			}
			code, err := c.Exec(cmd.Context(), ws, args[0], args[1:], cmd.InOrStdin(), cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	addWorkspaceFlag(cmd, &ws)
	return cmd
}

// computeEnv names the compute instance a session or a setup script runs on: the engine
// sets it, with MLCOMPUTE_WORKSPACE, in their environment.
const computeEnv = "MLCOMPUTE_COMPUTE"

func newReportActivityCommand(g *globals) *cobra.Command {
	var ws string
	cmd := &cobra.Command{
		Use:   "report-activity [NAME]",
		Short: "Tell the engine a compute instance is in use, which restarts its idle-shutdown countdown",
		Long: "Report activity on a compute instance: its idle_time_before_shutdown counts again " +
			"from now. An application on the instance (a notebook server, a long interactive " +
			"tool) calls it while it is in use. NAME defaults to " + computeEnv + ", which the " +
			"engine sets, with MLCOMPUTE_WORKSPACE, for sessions (compute exec) and setup scripts.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := os.Getenv(computeEnv)
			if len(args) == 1 {
				name = args[0]
			}
			if name == "" {
				return fmt.Errorf("name the compute instance (NAME, or set %s)", computeEnv)
			}
			c, err := g.workspaceClient(cmd.Context(), ws, "")
			if err != nil {
				return err
			}
			if err := c.ReportActivity(cmd.Context(), ws, name); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "activity reported on %s/%s\n", ws, name)
			return nil
		},
	}
	addWorkspaceFlag(cmd, &ws)
	return cmd
}
