package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

type serveFlags struct {
	listen          string
	tokenFile       string
	minIdleShutdown time.Duration
	nodes           string
	slurm           slurmFlags
	kube            kubeFlags
	locations       []string
	capacityVCPUs   int64
	gpus            string
	fakeGPUs        int
	containerd      string
	scoringListen   string
	idleExit        time.Duration
	maxOutputSize   byteSize
	tls             daemon.TLSOptions
}

func newServeCommand(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the engine in the foreground",
		Long: "Run the engine in the foreground. Without --listen it serves the data dir's " +
			"engine.sock (mode 0600). It exits by itself after --idle-exit with nothing to " +
			"manage and no API calls, and at once when its data dir is deleted.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", "", "API address: unix:///PATH or tcp://127.0.0.1:PORT (default: <data-dir>/engine.sock)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the API token (mode 0600). A TCP listener always needs a token: without this flag the engine makes one in <data-dir>/"+daemon.TokenFile+", where the CLI and provider on this machine find it")
	fl.DurationVar(&f.minIdleShutdown, "min-idle-shutdown", validation.DefaultMinIdleTimeBeforeShutdown, "the shortest idle_time_before_shutdown a compute instance may ask for")
	fl.StringVar(&f.nodes, "nodes", "local", "where nodes come from: local, slurm or kubernetes")
	f.slurm.register(fl)
	f.kube.register(fl)
	fl.StringArrayVar(&f.locations, "location", []string{api.DefaultLocation}, "a location this engine serves (repeatable)")
	fl.Int64Var(&f.capacityVCPUs, "capacity-vcpus", 0, "vCPUs this engine may hand out to nodes (0: unlimited)")
	fl.StringVar(&f.gpus, "gpus", "", "the GPUs local nodes get, as indices or UUIDs (e.g. 0,1); default: those nvidia-smi -L lists, else /dev/nvidia<N>")
	fl.IntVar(&f.fakeGPUs, "fake-gpus", 0, "give local nodes N fake GPUs numbered from 0, for tests (instead of --gpus)")
	fl.StringVar(&f.containerd, "containerd-address", "", "containerd's socket (e.g. /run/containerd/containerd.sock), with which local nodes run tasks in a container image; without it such tasks are refused")
	fl.StringVar(&f.scoringListen, "scoring-listen", "", "HOST:PORT of the online endpoints' scoring router (default: the address of the first start, at first a free loopback port; it is kept so scoring_uri never changes)")
	f.maxOutputSize = byteSize(daemon.DefaultMaxOutputSize)
	fl.Var(&f.maxOutputSize, "max-output-size", "the largest output a job may leave, such as 20GB or 512MiB (KB, MB, GB, TB count in 1000s, KiB, MiB, GiB, TiB in 1024s); a job whose output is larger fails, naming it")
	fl.BoolVar(&f.tls.On, "tls", false, "serve TLS on loopback TCP listeners too (off loopback TLS is always on, unless --insecure-http)")
	fl.StringVar(&f.tls.CertFile, "tls-cert", "", "PEM certificate chain of the TCP listeners (with --tls-key; default: a CA and certificate the engine makes once in <data-dir>/"+tlsconfig.CAFile+" and "+tlsconfig.ServerFile+")")
	fl.StringVar(&f.tls.KeyFile, "tls-key", "", "PEM private key of --tls-cert")
	fl.BoolVar(&f.tls.InsecureHTTP, "insecure-http", false, "serve plain HTTP off loopback: tokens and endpoint keys cross the network in clear (warned at start)")
	fl.DurationVar(&f.idleExit, "idle-exit", daemon.DefaultIdleExit, "exit after this long with nothing to manage and no API calls (0: never)")
	return cmd
}

func runServe(ctx context.Context, g *globals, f serveFlags) error {
	if f.minIdleShutdown < time.Second {
		return fmt.Errorf("--min-idle-shutdown must be at least 1s, got %s", f.minIdleShutdown)
	}
	if f.capacityVCPUs < 0 {
		return fmt.Errorf("--capacity-vcpus must be 0 (unlimited) or more, got %d", f.capacityVCPUs)
	}
	if f.nodes != "local" && f.nodes != "slurm" && f.nodes != "kubernetes" {
		return fmt.Errorf("--nodes %s is not supported; use local, slurm or kubernetes", f.nodes)
	}
	var gpus []string
	switch {
	case f.gpus != "" && f.fakeGPUs != 0:
		return errors.New("--gpus and --fake-gpus cannot be used together; give one")
	case f.gpus != "":
		var err error
		if gpus, err = daemon.ParseGPUs(f.gpus); err != nil {
			return err
		}
	case f.fakeGPUs != 0:
		if _, err := daemon.FakeGPUs(f.fakeGPUs); err != nil {
			return err
		}
	}
	if (f.gpus != "" || f.fakeGPUs != 0) && f.nodes != "local" {
		return fmt.Errorf("--gpus and --fake-gpus are for local nodes; with --nodes %s the %s gives nodes their GPUs", f.nodes, f.nodes)
	}
	if f.containerd != "" && f.nodes != "local" {
		return fmt.Errorf("--containerd-address is for local nodes; with --nodes %s the nodes run container images themselves (%s)", f.nodes, ownContainerRuntime(f.nodes))
	}
	slurmCfg, err := f.slurm.config(f.nodes == "slurm")
	if err != nil {
		return err
	}
	kubeCfg, err := f.kube.config(f.nodes == "kubernetes")
	if err != nil {
		return err
	}
	dir, err := g.resolvedDataDir()
	if err != nil {
		return err
	}
	token := ""
	if f.tokenFile != "" {
		if token, err = daemon.ReadTokenFile(f.tokenFile); err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
	}
	agentArgv, err := g.self("node-agent")
	if err != nil {
		return err
	}
	daemon.SetGCPace()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stopProfile := startEngineProfile(os.Getenv(engineProfileEnv))
	defer stopProfile()
	err = daemon.Run(ctx, daemon.Options{
		AgentArgv:         agentArgv,
		CapacityVCPUs:     f.capacityVCPUs,
		GPUs:              gpus,
		ContainerdAddress: f.containerd,
		FakeGPUs:          f.fakeGPUs,
		MinIdleShutdown:   f.minIdleShutdown,
		DataDir:           dir,
		Listen:            f.listen,
		ScoringListen:     f.scoringListen,
		Token:             token,
		Locations:         f.locations,
		Nodes:             f.nodes,
		Slurm:             slurmCfg,
		Kubernetes:        kubeCfg,
		IdleExit:          f.idleExit,
		MaxOutputSize:     int64(f.maxOutputSize),
		TLS:               f.tls,
		Version:           g.cfg.Version,
		Logger:            g.logger(os.Stderr),
	})
	if errors.Is(err, daemon.ErrAlreadyRunning) {
		fmt.Fprintf(os.Stderr, "Error: %v (data dir %s); stop it with 'mlcompute shutdown'\n", err, dir)
		return exitCode(daemon.ExitAlreadyRunning)
	}
	return err
}

// ownContainerRuntime says how the nodes of a driver other than local (--nodes is checked
// first: slurm or kubernetes) run container images.
func ownContainerRuntime(nodes string) string {
	if nodes == "slurm" {
		return "with each Slurm machine's own containerd"
	}
	return "in an ephemeral container of the node's pod"
}
