// Package cli is the mlcompute command line: the operator's and user's tool. The provider
// binary embeds the same commands under its hidden "engine" subcommand, which is how the
// provider starts the embedded engine from its own binary.
package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
)

// Config describes the binary the commands run in.
type Config struct {
	// Use is the command's name as users type it.
	Use string
	// Self returns the argv prefix that runs this command tree from this binary
	// ([mlcompute] or [terraform-provider-mlcompute engine]): the engine is started as
	// Self+serve and its nodes as Self+node-agent.
	Self    func() ([]string, error)
	Version string
}

// globals are the connection settings every command shares.
type globals struct {
	cfg      Config
	dataDir  string
	endpoint string
	token    string
	logLevel string
}

// NewRootCommand builds the command tree.
func NewRootCommand(cfg Config) *cobra.Command {
	g := &globals{cfg: cfg}
	root := &cobra.Command{
		Use:           cfg.Use,
		Short:         "Run and use the mlcompute engine: compute targets, jobs and endpoints for ML",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       cfg.Version,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.dataDir, "data-dir", "", "the embedded engine's data dir (env MLCOMPUTE_HOME; default $XDG_DATA_HOME/mlcompute)")
	pf.StringVar(&g.endpoint, "endpoint", os.Getenv("MLCOMPUTE_ENDPOINT"), "a running engine: unix:///path.sock or http(s)://host:port (env MLCOMPUTE_ENDPOINT)")
	pf.StringVar(&g.token, "token", "", "API token for a TCP endpoint (env MLCOMPUTE_TOKEN; prefer the variable: flags show in ps)")
	pf.StringVar(&g.logLevel, "log-level", envOr("MLCOMPUTE_LOG", "info"), "log level: trace, debug, info, warn, error (env MLCOMPUTE_LOG)")
	root.AddCommand(newServeCommand(g), newStatusCommand(g), newShutdownCommand(g), newBackupCommand(g), newSizesCommand(g), newComputeCommand(g), newJobCommand(g), newEndpointCommand(g), newNodeAgentCommand(g), newContainerRunCommand(), newContainerImportCommand(), newUICommand(g), newLoginCommand(g), newTokenCommand(g), newAuditCommand(g))
	return root
}

// Main runs the command tree with args and returns the process exit code.
func Main(cfg Config, args []string) int {
	top, args := withProgram(NewRootCommand(cfg), args)
	top.SetArgs(args)
	if err := top.ExecuteContext(context.Background()); err != nil {
		var exit exitCode
		if asExit(err, &exit) {
			return int(exit)
		}
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}

// withProgram hangs a tree whose Use has two words ("terraform-provider-mlcompute engine")
// under a parent named by the first, and returns the command to execute with its args:
// cobra names a command by the first word of its Use, so the usage lines would otherwise
// leave out "engine".
func withProgram(root *cobra.Command, args []string) (*cobra.Command, []string) {
	program, sub, ok := strings.Cut(root.Use, " ")
	if !ok {
		return root, args
	}
	root.Use = sub
	top := &cobra.Command{Use: program, SilenceUsage: true, SilenceErrors: true}
	top.AddCommand(root)
	return top, append([]string{sub}, args...)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// resolvedDataDir is the data dir as an absolute path: the engine's socket address is
// built from it and must not depend on the current directory.
func (g *globals) resolvedDataDir() (string, error) {
	dir := g.dataDir
	if dir == "" {
		var err error
		if dir, err = daemon.DefaultDataDir(); err != nil {
			return "", err
		}
	}
	return filepath.Abs(dir)
}

func (g *globals) resolvedToken() string {
	if g.token != "" {
		return g.token
	}
	return os.Getenv("MLCOMPUTE_TOKEN")
}

// tokenDataDir is the data dir whose API token a loopback TCP endpoint may use (an engine
// started with 'serve --listen tcp://...' and no --token-file writes one there), or "".
func (g *globals) tokenDataDir() string {
	dir, err := g.resolvedDataDir()
	if err != nil {
		return ""
	}
	return dir
}

func (g *globals) logger(w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "mlcompute", Level: hclog.LevelFromString(g.logLevel), Output: w})
}

// connect returns a client for the configured engine, starting the embedded one if needed.
func (g *globals) connect(ctx context.Context) (*client.Client, error) {
	if g.endpoint != "" {
		ca, err := caCertFromEnv()
		if err != nil {
			return nil, err
		}
		return daemon.Connect(ctx, daemon.ConnectOptions{Endpoint: g.endpoint, Token: g.resolvedToken(), DataDir: g.tokenDataDir(), CACert: ca})
	}
	dir, err := g.resolvedDataDir()
	if err != nil {
		return nil, err
	}
	argv, err := g.self("serve")
	if err != nil {
		return nil, err
	}
	return daemon.Connect(ctx, daemon.ConnectOptions{DataDir: dir, Command: argv})
}

// self returns the argv that runs one of this tree's commands from this binary.
func (g *globals) self(command string) ([]string, error) {
	prefix, err := g.cfg.Self()
	if err != nil {
		return nil, fmt.Errorf("finding this program's path: %w", err)
	}
	return append(append([]string(nil), prefix...), command), nil
}

// existing returns a client for an engine that is already running, without starting one.
func (g *globals) existing() (*client.Client, string, error) {
	if g.endpoint != "" {
		token, err := daemon.EndpointToken(g.endpoint, g.resolvedToken(), g.tokenDataDir())
		if err != nil {
			return nil, g.endpoint, err
		}
		tlsOpt, err := g.tlsOption()
		if err != nil {
			return nil, g.endpoint, err
		}
		c, err := client.New(g.endpoint, token, append(tlsOpt, client.WithAttempts(1))...)
		return c, g.endpoint, err
	}
	dir, err := g.resolvedDataDir()
	if err != nil {
		return nil, "", err
	}
	l := daemon.Launcher{DataDir: dir}
	c, err := client.New(l.Endpoint(), "", client.WithAttempts(1))
	return c, l.Endpoint(), err
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// exitCode is an error that only carries a process exit code (the message was printed).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func asExit(err error, target *exitCode) bool {
	e, ok := err.(exitCode)
	if ok {
		*target = e
	}
	return ok
}

func addOutputFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVarP(dst, "output", "o", "table", "output format: table or json")
}

func checkOutput(format string) error {
	if format != "table" && format != "json" {
		return fmt.Errorf("--output must be table or json, got %q", format)
	}
	return nil
}
