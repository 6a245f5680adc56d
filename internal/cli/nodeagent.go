package cli

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
)

// newNodeAgentCommand is the hidden command the local node driver starts, detached, once
// per node: `node-agent --dir <data_dir>/nodes/<key>`. It is the node: it runs the node's
// tasks and records their output and exit codes in the directory until SIGTERM.
func newNodeAgentCommand(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "node-agent --dir DIR",
		Short:  "Run one local node (started by the engine's local driver)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--dir is required")
			}
			return nodeagent.Run(cmd.Context(), dir, g.logger(os.Stderr))
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the node's directory")
	return cmd
}

// newContainerRunCommand is the hidden command a node agent runs as a task's process when
// the task runs in a container (nodeagent.ContainerRunCommand); it exits with the status
// of the command in the container.
func newContainerRunCommand() *cobra.Command {
	return &cobra.Command{
		Use:                nodeagent.ContainerRunCommand + " --address SOCK ... -- COMMAND...",
		Short:              "Run a task's command in its image (started by a node agent)",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(cmd *cobra.Command, args []string) {
			os.Exit(nodeagent.ContainerRunMain(args, os.Stdout, os.Stderr))
		},
	}
}

// newContainerImportCommand is the hidden command the engine runs on a Kubernetes node to
// import an image archive into the node's containerd (nodeagent.ContainerImportCommand).
func newContainerImportCommand() *cobra.Command {
	return &cobra.Command{
		Use:                nodeagent.ContainerImportCommand + " --address SOCK --namespace NS --archive FILE --hash HASH",
		Short:              "Import an environment's image archive into a machine's containerd (run by the engine)",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(cmd *cobra.Command, args []string) {
			os.Exit(nodeagent.ContainerImportMain(args, os.Stdout, os.Stderr))
		},
	}
}
