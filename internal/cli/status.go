package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
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
	var noWait bool
	cmd := &cobra.Command{
		Use:   "shutdown",
		Short: "Stop the engine serving this data dir or endpoint, and wait until it has exited",
		Long: "Stop the engine serving this data dir or endpoint. Running jobs and nodes are " +
			"adopted when it starts again.\n\n" +
			"It returns once the engine has exited and released its store (up to about 10 s, " +
			"while in-flight requests finish), so state.db may be copied over at once. For an " +
			"engine on another machine it returns once the engine no longer answers. " +
			"--no-wait returns as soon as the engine has accepted the request.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, where, err := g.existing()
			if err != nil {
				return err
			}
			st, err := c.Status(ctx)
			if err == nil {
				err = c.Shutdown(ctx)
			}
			if client.IsUnreachable(err) {
				fmt.Fprintf(cmd.OutOrStdout(), "no engine running at %s\n", where)
				return nil
			}
			if err != nil {
				return err
			}
			if noWait {
				fmt.Fprintf(cmd.OutOrStdout(), "engine at %s is shutting down\n", where)
				return nil
			}
			if err := waitStopped(ctx, c, where, st.PID); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "engine at %s has stopped\n", where)
			return nil
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "return once the engine has accepted the request, without waiting for it to exit")
	return cmd
}

// shutdownWait bounds the wait for an engine to exit: it gives in-flight API and scoring
// requests 5 s each, then closes its store.
const shutdownWait = 30 * time.Second

// waitStopped waits until the engine that answered at where has stopped: on this machine
// (a unix socket or a loopback address) until its process pid has exited, and so released
// its store; elsewhere until it no longer answers.
func waitStopped(ctx context.Context, c *client.Client, where string, pid int) error {
	ctx, cancel := context.WithTimeout(ctx, shutdownWait)
	defer cancel()
	if u, err := url.Parse(where); err == nil && pid > 0 && (u.Scheme == "unix" || daemon.IsLoopbackHost(u.Hostname())) {
		if err := daemon.WaitExited(ctx, pid); err != nil {
			return fmt.Errorf("the engine at %s (pid %d) has not exited after %s: %w", where, pid, shutdownWait, err)
		}
		return nil
	}
	for {
		if _, err := c.Status(ctx); client.IsUnreachable(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the engine at %s still answers %s after it was asked to shut down", where, shutdownWait)
		case <-time.After(100 * time.Millisecond):
		}
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
