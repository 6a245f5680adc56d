package nodeagent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/envprep"
)

// ContainerRunCommand is the hidden subcommand of the agent's binary that is a task's
// process when the task runs in a container: it imports the image (once per content hash on
// the machine) and runs the command in a container. Being the task's process, it is what
// the agent's wrapper records the exit status of, and what its kill stops; the container's
// processes carry the task's marker too, so the agent's sweep of an ended task's processes
// reaches them even when this process was SIGKILLed.
const ContainerRunCommand = "container-run"

// TaskContainer is a task's image: the task's command runs in it, with the task's
// directory (its working directory, code, inputs and outputs) mounted at the same path and
// the task's environment.
type TaskContainer struct {
	// Address is the machine's containerd socket; EngineID labels the container.
	Address  string `json:"address"`
	EngineID string `json:"engine_id"`
	// Key is the task's key on the machine (driver.MachineTaskKey), which names its container:
	// the nodes of one machine share its containerd, and their tasks' keys repeat (every
	// endpoint instance's first task is serve-0).
	Key string `json:"key"`
	// Archive is the image archive on the machine, or else Image the image's reference,
	// pulled when the machine lacks it; Hash is the environment's content hash.
	Archive string `json:"archive,omitempty"`
	Image   string `json:"image,omitempty"`
	Hash    string `json:"hash"`
	// EnvCache mounts the machine's environment cache; Mounts are more host paths mounted
	// at the same paths (driver.TaskContainer).
	EnvCache bool     `json:"env_cache,omitempty"`
	Mounts   []string `json:"mounts,omitempty"`
}

func (c *TaskContainer) check() error {
	switch {
	case c.Address == "" || !filepath.IsAbs(c.Address):
		return errors.New("container.address must be an absolute path")
	case (c.Archive == "") == (c.Image == ""):
		return errors.New("container needs exactly one of archive and image")
	case c.Archive != "" && !filepath.IsAbs(c.Archive):
		return errors.New("container.archive must be an absolute path")
	case c.EngineID == "" || c.Key == "" || c.Hash == "":
		return errors.New("container.engine_id, container.key and container.hash are required")
	}
	for _, m := range c.Mounts {
		if !filepath.IsAbs(m) {
			return errors.New("container.mounts must be absolute paths")
		}
	}
	return nil
}

// containerRunArgv is how the agent's binary self, started with args, runs
// ContainerRunCommand: with the words that came before "node-agent" on the agent's own
// command line (the provider's binary takes the CLI's commands after "engine"), or alone.
func containerRunArgv(self string, args []string) []string {
	argv := []string{self}
	if i := slices.Index(args, "node-agent"); i > 0 {
		argv = append(argv, args[1:i]...)
	}
	return append(argv, ContainerRunCommand)
}

// ContainerRunArgv is the command line that runs command in image c as task c.Key:
// containerRun (the words that make a binary ContainerRunCommand) and its flags. An empty
// c.Address is the machine's own containerd (containerrt.MachineAddress); an empty bind and
// cwd are the directory the command starts in, mounted at the same path (a task's
// directory on a machine the engine reaches over SSH or through Slurm).
func ContainerRunArgv(containerRun []string, c TaskContainer, bind, cwd string, command []string) []string {
	argv := slices.Clone(containerRun)
	if c.Address != "" {
		argv = append(argv, "--address", c.Address)
	}
	argv = append(argv, "--engine", c.EngineID, "--key", c.Key)
	if c.Archive != "" {
		argv = append(argv, "--archive", c.Archive)
	} else {
		argv = append(argv, "--image", c.Image)
	}
	argv = append(argv, "--hash", c.Hash)
	if c.EnvCache {
		argv = append(argv, "--env-cache")
	}
	for _, m := range c.Mounts {
		argv = append(argv, "--mount", m)
	}
	if bind != "" {
		argv = append(argv, "--cwd", cwd, "--bind", bind)
	}
	return append(append(argv, "--"), command...)
}

// ContainerRunMain is ContainerRunCommand's main: args are its flags, then "--" and the
// command. It runs with the task's environment and returns the exit status of the command;
// a container that cannot be run is 125 with the reason on stderr (the task's output).
// SIGTERM or SIGINT stops the container.
func ContainerRunMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(ContainerRunCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var t containerrt.Task
	var bind string
	fs.StringVar(&t.Address, "address", "", "containerd's socket (default: $"+containerrt.AddressEnv+", else "+containerrt.DefaultAddress+")")
	fs.StringVar(&t.EngineID, "engine", "", "the engine's ID")
	fs.StringVar(&t.Key, "key", "", "the task's key")
	fs.StringVar(&t.Archive, "archive", "", "the image archive")
	fs.StringVar(&t.Image, "image", "", "the image's reference (without an archive)")
	fs.StringVar(&t.Hash, "hash", "", "the environment's content hash")
	fs.StringVar(&t.Cwd, "cwd", "", "the working directory (with --bind)")
	fs.StringVar(&bind, "bind", "", "a host path mounted at the same path (default: the current directory, also the working directory)")
	envCache := fs.Bool("env-cache", false, "mount the machine's environment cache ($"+envprep.CacheVar+", else ~/.mlcompute/envs)")
	var mounts stringList
	fs.Var(&mounts, "mount", "a host path mounted at the same path when it exists (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 125
	}
	if t.Address == "" {
		t.Address = containerrt.MachineAddress(os.Getenv)
	}
	if bind == "" {
		wd, err := os.Getwd()
		if err != nil {
			fmt.Fprintf(stderr, "mlcompute: %v\n", err)
			return 125
		}
		bind, t.Cwd = wd, wd
	}
	t.Binds = []string{bind}
	if *envCache {
		cache, err := envprep.MachineCache(os.Getenv)
		if err == nil {
			err = os.MkdirAll(cache, 0o755)
		}
		if err != nil {
			fmt.Fprintf(stderr, "mlcompute: the environment cache: %v\n", err)
			return 125
		}
		t.Binds = append(t.Binds, cache)
	}
	for _, m := range mounts {
		if _, err := os.Stat(m); err == nil {
			t.Binds = append(t.Binds, m)
		}
	}
	t.Args = fs.Args()
	t.Env = os.Environ()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	code, err := containerrt.RunTask(ctx, t, stdout, stderr)
	if err != nil && code < 0 {
		fmt.Fprintf(stderr, "mlcompute: %v\n", err)
		return 125
	}
	return code
}

// ContainerImportCommand is the hidden subcommand that imports an environment's image
// archive into a machine's containerd, in a namespace of the caller's choice: the engine
// runs it in a pod on a Kubernetes node, against the node's containerd, before the pods of
// a job in the archive's image (ssh.ContainerRunner.ImportImage).
const ContainerImportCommand = "container-import"

// ContainerImportMain is ContainerImportCommand's main: it imports --archive under the
// image name of --hash, unpacked, unless it is there already, and says which it did. A
// failure is exit status 1 with the reason on stderr.
func ContainerImportMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(ContainerImportCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	address := fs.String("address", "", "containerd's socket (default: $"+containerrt.AddressEnv+", else "+containerrt.DefaultAddress+")")
	namespace := fs.String("namespace", containerrt.Namespace, "the containerd namespace")
	archive := fs.String("archive", "", "the image archive")
	hash := fs.String("hash", "", "the environment's content hash (names the image)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *archive == "" || *hash == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "mlcompute: container-import needs --archive and --hash, and no other argument")
		return 2
	}
	if *address == "" {
		*address = containerrt.MachineAddress(os.Getenv)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rt, err := containerrt.OpenIn(ctx, *address, *namespace, "")
	if err != nil {
		fmt.Fprintf(stderr, "mlcompute: %v\n", err)
		return 1
	}
	defer rt.Close()
	imported, err := rt.Import(ctx, *archive, *hash)
	if err != nil {
		fmt.Fprintf(stderr, "mlcompute: %v\n", err)
		return 1
	}
	if imported {
		fmt.Fprintf(stdout, "imported %s\n", containerrt.ImageName(*hash))
	} else {
		fmt.Fprintf(stdout, "%s is there already\n", containerrt.ImageName(*hash))
	}
	return 0
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
