package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

func newStatusCommand(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the health of the engine (does not start one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, where, err := g.existing()
			if err != nil {
				return err
			}
			st, err := c.Status(cmd.Context())
			if client.IsUnreachable(err) {
				fmt.Fprintf(cmd.ErrOrStderr(), "no engine answers at %s\n", where)
				return exitCode(1)
			}
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), st)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "engine:    healthy at %s\n", where)
			fmt.Fprintf(w, "version:   %s\n", st.Version)
			fmt.Fprintf(w, "pid:       %d\n", st.PID)
			fmt.Fprintf(w, "nodes:     %s\n", st.NodesDriver)
			fmt.Fprintf(w, "locations: %s\n", strings.Join(st.Locations, ", "))
			fmt.Fprintf(w, "started:   %s\n", st.StartedAt.Format("2006-01-02 15:04:05 MST"))
			printGPUs(w, st.GPUs)
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func newShutdownCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "shutdown",
		Short: "Stop the engine serving this data dir or endpoint",
		Long: "Stop the engine serving this data dir or endpoint. Running jobs and nodes are " +
			"adopted when it starts again.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, where, err := g.existing()
			if err != nil {
				return err
			}
			err = c.Shutdown(cmd.Context())
			if client.IsUnreachable(err) {
				fmt.Fprintf(cmd.OutOrStdout(), "no engine running at %s\n", where)
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "engine at %s is shutting down\n", where)
			return nil
		},
	}
}

// printGPUs prints the machine's GPUs and the node holding each, one a line.
func printGPUs(w io.Writer, gpus []api.GPU) {
	if len(gpus) == 0 {
		fmt.Fprintf(w, "gpus:      none\n")
		return
	}
	fmt.Fprintf(w, "gpus:      %d\n", len(gpus))
	for _, g := range gpus {
		holder := "free"
		if g.Node != "" {
			holder = g.Node + " (" + g.Compute + ")"
		}
		fmt.Fprintf(w, "  gpu %s: %s\n", g.ID, holder)
	}
}
