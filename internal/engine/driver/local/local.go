// Package local is the default node driver: a node is a node agent process (see package
// nodeagent) with its own directory under <data_dir>/nodes, and its tasks are that agent's
// children. Nodes outlive the engine; a restarted engine adopts them with Describe or List.
//
// Watching costs nothing while nothing happens: each watched node has one goroutine asleep
// in poll(2) on the agent's pidfd, so an agent's death (even SIGKILL) is a NodeGone event
// the moment it happens, and each running task has one long-poll request that the agent
// answers when the task exits, which becomes a TaskExited event with the recorded exit
// code. Nothing polls on an interval.
//
// A node is ready when Create returns (its agent serves), so NodeInfo.Ready is always
// true and the driver never emits NodeReady. Errors: ErrNotFound for a node whose
// directory is gone or whose agent is dead, and for an unknown task; ErrNoCapacity when
// Create finds no room (a full disk or quota, no memory or processes left); ErrPermanent
// when it cannot work until someone acts (no permission, a read-only file system, a
// missing or unrunnable agent binary); ErrTransient when an agent that runs does not
// answer, or did not start serving in time.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/keylock"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
)

// Name is the driver's name as `mlcompute serve --nodes` spells it.
const Name = "local"

// Address is every local node's address.
const Address = "127.0.0.1"

const (
	defaultStartTimeout = 30 * time.Second
	defaultStopTimeout  = 10 * time.Second
	// sweepTimeout bounds the sweep of ended containers when the driver starts.
	sweepTimeout    = 30 * time.Second
	eventBuffer     = 256
	maxRetryBackoff = 2 * time.Second
)

// Config configures New.
type Config struct {
	// Dir holds one directory per node (<data_dir>/nodes).
	Dir string
	// AgentArgv runs the node agent with this binary, e.g. [exe, "engine", "node-agent"]
	// or [exe, "node-agent"]; "--dir <node dir>" is appended.
	AgentArgv []string
	Clock     clock.WithTicker
	Logger    hclog.Logger
	// StartTimeout bounds how long Create waits for a new agent to serve (default 30 s).
	StartTimeout time.Duration
	// StopTimeout is how long Terminate lets an agent stop its tasks after SIGTERM before
	// it uses SIGKILL (default 10 s).
	StopTimeout time.Duration
	// ContainerdAddress is the containerd socket tasks in a container run with (serve
	// --containerd-address); empty: such tasks are refused. EngineID labels their
	// containers.
	ContainerdAddress string
	EngineID          string
}

// Driver is the local driver. It is safe for concurrent use.
type Driver struct {
	dir          string
	argv         []string
	clk          clock.WithTicker
	log          hclog.Logger
	startTimeout time.Duration
	stopTimeout  time.Duration
	containerd   string
	engineID     string

	events chan driver.Event
	ctx    context.Context // ends with Close; every watcher runs under it
	cancel context.CancelFunc
	wg     sync.WaitGroup
	keys   keylock.Locks // serializes Create, Describe, Terminate and recovery per node

	mu      sync.Mutex
	watches map[string]*watch
	clients map[string]*nodeagent.Client // by node dir
	closed  bool
	// standby is an agent started ahead of the next Create (see spawnAgent); preparing
	// says one is being started.
	standby   *nodeagent.Standby
	preparing bool
}

var _ driver.Driver = (*Driver)(nil)

// watch is one watched node: an agent (by pid) and the tasks whose exit we wait for.
type watch struct {
	key    string
	dir    string
	pid    int
	client *nodeagent.Client
	ctx    context.Context // ends when the node is no longer watched
	cancel context.CancelFunc
	tasks  map[string]bool // guarded by Driver.mu
}

// nodeRecord is node.json, written before the agent starts.
type nodeRecord struct {
	Key      string    `json:"key"`
	Owner    string    `json:"owner"`
	VMSize   string    `json:"vm_size"`
	VCPUs    int64     `json:"vcpus"`
	MemoryGB float64   `json:"memory_gb"`
	Created  time.Time `json:"created"`
	// GPUs are the machine's GPUs the node holds; Env shows them to its tasks (the
	// agent reads it, see nodeagent.NodeEnv).
	GPUs []string          `json:"gpus,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
}

// gpuEnv is what shows a node its GPUs, and only those: nil GPUs leave the machine's
// devices as they are, an empty list hides them all.
func gpuEnv(gpus []string) map[string]string {
	if gpus == nil {
		return nil
	}
	if len(gpus) == 0 {
		return map[string]string{"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"}
	}
	list := strings.Join(gpus, ",")
	return map[string]string{"CUDA_VISIBLE_DEVICES": list, "NVIDIA_VISIBLE_DEVICES": list}
}

// New returns a driver over cfg.Dir, creating it if needed.
func New(cfg Config) (*Driver, error) {
	if cfg.Dir == "" {
		return nil, errors.New("creating local driver: no node dir")
	}
	if len(cfg.AgentArgv) == 0 {
		return nil, errors.New("creating local driver: no agent command")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolving node dir: %w", err)
	}
	// Nodes hold jobs' code, output and environments: 0700 even when the directory was
	// there before with a looser mode (made by hand, or by an older version).
	if err := privateDir(dir); err != nil {
		return nil, fmt.Errorf("creating node dir: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = defaultStartTimeout
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = defaultStopTimeout
	}
	containerd := cfg.ContainerdAddress
	if containerd != "" {
		if cfg.EngineID == "" {
			return nil, errors.New("creating local driver: a containerd address needs the engine's ID")
		}
		if containerd, err = filepath.Abs(containerd); err != nil {
			return nil, fmt.Errorf("resolving the containerd address: %w", err)
		}
		sweepContainers(containerd, cfg.EngineID, cfg.Logger.Named("driver.local"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Driver{
		dir:          dir,
		argv:         append([]string(nil), cfg.AgentArgv...),
		clk:          cfg.Clock,
		log:          cfg.Logger.Named("driver.local"),
		startTimeout: cfg.StartTimeout,
		stopTimeout:  cfg.StopTimeout,
		containerd:   containerd,
		engineID:     cfg.EngineID,
		events:       make(chan driver.Event, eventBuffer),
		ctx:          ctx,
		cancel:       cancel,
		watches:      map[string]*watch{},
		clients:      map[string]*nodeagent.Client{},
	}, nil
}

// sweepContainers removes the ended containers this engine's tasks left on the machine (a
// task's process killed before it could delete its container). A containerd that cannot be
// reached is logged: the tasks that need it then fail, naming it.
func sweepContainers(address, engineID string, log hclog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	rt, err := containerrt.Open(ctx, address, engineID)
	if err != nil {
		log.Warn("tasks in a container image cannot run", "error", err)
		return
	}
	defer rt.Close()
	removed, err := rt.SweepEnded(ctx)
	if err != nil {
		log.Warn("sweeping ended containers failed", "containerd", address, "error", err)
	}
	if len(removed) > 0 {
		log.Info("removed ended containers", "containerd", address, "containers", removed)
	}
}

// removeContainers removes the containers of the tasks of a node that is going (its agent
// and their processes are stopped), so that none outlives it: a task's process killed with
// its node cannot remove its own container. A containerd that cannot be reached is logged,
// and the next engine start's sweep removes them.
func (d *Driver) removeContainers(key, dir string) {
	if d.containerd == "" {
		return
	}
	ents, _ := os.ReadDir(filepath.Join(dir, nodeagent.TasksDir))
	tasks := map[string]bool{}
	for _, e := range ents {
		if k, err := nodeagent.KeyFromDirName(e.Name()); err == nil {
			tasks[driver.MachineTaskKey(key, k)] = true
		}
	}
	if len(tasks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(d.ctx, sweepTimeout)
	defer cancel()
	rt, err := containerrt.Open(ctx, d.containerd, d.engineID)
	if err != nil {
		d.log.Warn("removing a terminated node's containers failed", "node", key, "error", err)
		return
	}
	defer rt.Close()
	removed, err := rt.Sweep(ctx, func(task string) bool { return !tasks[task] })
	if err != nil {
		d.log.Warn("removing a terminated node's containers failed", "node", key, "error", err)
	}
	if len(removed) > 0 {
		d.log.Info("removed a terminated node's containers", "node", key, "containers", removed)
	}
}

// Name returns "local".
func (d *Driver) Name() string { return Name }

// Create starts a node agent in <Dir>/<key> (node.json first, then the agent, detached in
// its own session with its output in agent.log) and returns once the agent serves. If a
// live agent already serves that directory, Create returns that node: it is idempotent
// under spec.Key. A directory whose agent died gets a new agent, which first kills
// whatever the dead one left running. The node is watched from then on and is ready:
// NodeInfo.Ready is true. Failing system calls are classified (see classify).
func (d *Driver) Create(ctx context.Context, spec driver.NodeSpec) (driver.NodeInfo, error) {
	dir, err := d.nodeDir(spec.Key)
	if err != nil {
		return driver.NodeInfo{}, fmt.Errorf("creating node: %w", err)
	}
	unlock := d.keys.Lock(spec.Key)
	defer unlock()
	if _, err := readRecord(dir); err == nil {
		info, err := d.adopt(ctx, spec.Key, dir)
		if err == nil {
			return info, nil
		}
		if !driver.IsNotFound(err) {
			return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, err)
		}
	}
	if err := privateDir(dir); err != nil {
		return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, classify(err))
	}
	rec := nodeRecord{Key: spec.Key, Owner: spec.Owner, VMSize: spec.VMSize, VCPUs: spec.VCPUs, MemoryGB: spec.MemoryGB, Created: d.clk.Now().UTC(),
		GPUs: spec.GPUs, Env: gpuEnv(spec.GPUs)}
	raw, _ := json.MarshalIndent(rec, "", "  ")
	if err := nodeagent.WriteLiveFile(filepath.Join(dir, nodeagent.NodeFile), append(raw, '\n'), 0o600); err != nil {
		return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, classify(err))
	}
	sp, err := d.spawnAgent(dir)
	if err != nil {
		return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, classify(err))
	}
	timer := d.clk.NewTimer(d.startTimeout)
	defer timer.Stop()
	select {
	case err = <-sp.Ready:
	case <-ctx.Done():
		// The agent keeps starting; Create again with the same key finds it.
		return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, ctx.Err())
	case <-timer.C():
		_ = sp.Cmd.Process.Kill()
		return driver.NodeInfo{}, driver.Transient(fmt.Errorf("creating node %s: the node agent did not serve within %s; see %s",
			spec.Key, d.startTimeout, filepath.Join(dir, nodeagent.LogFile)))
	}
	if err == nil {
		// The agent we started serves: watch it by its pid without asking it, which is
		// safe while it is our unreaped child.
		if info, ok := d.adoptSpawned(spec.Key, dir, sp, rec); ok {
			d.log.Info("node created", "node", spec.Key, "owner", spec.Owner, "vm_size", spec.VMSize, "agent_pid", sp.Cmd.Process.Pid)
			return info, nil
		}
	}
	info, aerr := d.adopt(ctx, spec.Key, dir)
	if aerr != nil {
		if err != nil {
			// The agent exited first and nobody else serves the directory.
			return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, err)
		}
		if driver.IsNotFound(aerr) {
			// Not ErrNotFound: Create's caller would read that as "the node is gone".
			return driver.NodeInfo{}, fmt.Errorf("creating node %s: the node agent stopped right after starting; see %s",
				spec.Key, filepath.Join(dir, nodeagent.LogFile))
		}
		return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, aerr)
	}
	d.log.Info("node created", "node", spec.Key, "owner", spec.Owner, "vm_size", spec.VMSize, "agent_pid", sp.Cmd.Process.Pid)
	return info, nil
}

// Describe returns a node whose agent is alive and watches it (and its running tasks)
// from then on; this is how a restarted engine adopts its nodes. ErrNotFound when the
// node directory is missing or its agent is dead. Tasks that ended while nobody watched
// do not produce events: ask TaskStatus, or call StartTask again with the same key, which
// re-arms the watch and so yields TaskExited at once for an ended task.
func (d *Driver) Describe(ctx context.Context, key string) (driver.NodeInfo, error) {
	dir, err := d.nodeDir(key)
	if err != nil {
		return driver.NodeInfo{}, fmt.Errorf("describing node: %w", err)
	}
	unlock := d.keys.Lock(key)
	defer unlock()
	if info, ok := d.describeWatched(key, dir); ok {
		return info, nil
	}
	info, err := d.adopt(ctx, key, dir)
	if err != nil {
		return driver.NodeInfo{}, fmt.Errorf("describing node %s: %w", key, err)
	}
	return info, nil
}

// List returns the live nodes tagged with owner ("" for all), sorted by key, and watches
// them as Describe does. Directories whose agent is dead are not listed.
func (d *Driver) List(ctx context.Context, owner string) ([]driver.NodeInfo, error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var out []driver.NodeInfo
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(d.dir, e.Name())
		rec, err := readRecord(dir)
		if err != nil || (owner != "" && rec.Owner != owner) {
			continue
		}
		if name, err := nodeagent.DirName(rec.Key); err != nil || name != e.Name() {
			d.log.Warn("skipping node dir whose node.json names another key", "dir", e.Name())
			continue
		}
		unlock := d.keys.Lock(rec.Key)
		info, err := d.adopt(ctx, rec.Key, dir)
		unlock()
		if driver.IsNotFound(err) {
			d.log.Debug("skipping node with a dead agent", "node", rec.Key)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Terminate stops a node and returns once it is confirmed gone: it SIGTERMs the agent
// (which kills its tasks' process groups and records their exit codes), SIGKILLs it after
// StopTimeout, kills any task process still alive (found by its pgid file and marker),
// waits for all of them to exit and removes the node directory. It emits no event. A node
// whose directory is missing returns nil.
func (d *Driver) Terminate(ctx context.Context, key string) error {
	dir, err := d.nodeDir(key)
	if err != nil {
		return fmt.Errorf("terminating node: %w", err)
	}
	unlock := d.keys.Lock(key)
	defer unlock()
	d.unwatch(key)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if p := d.agentProc(ctx, dir); p != nil {
		err := d.stopAgent(ctx, p)
		p.Close()
		if err != nil {
			return fmt.Errorf("terminating node %s: %w", key, err)
		}
	}
	rctx, cancel := d.withTimeout(ctx, d.stopTimeout)
	n, err := nodeagent.RecoverDir(rctx, dir, d.log)
	cancel()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("terminating node %s: cleaning up its tasks: %w", key, err)
	}
	if n > 0 {
		d.log.Warn("killed tasks the node agent left behind", "node", key, "tasks", n)
	}
	d.removeContainers(key, dir)
	if err := removeAll(dir); err != nil {
		return fmt.Errorf("terminating node %s: removing its dir: %w", key, err)
	}
	d.log.Info("node terminated", "node", key)
	return nil
}

// StartTask starts a task on a node through its agent (idempotent under spec.Key) and
// watches it: its exit becomes a TaskExited event. Calling it again for a task that has
// ended re-arms the watch, so the TaskExited comes again. ErrNotFound if the node is gone.
func (d *Driver) StartTask(ctx context.Context, nodeKey string, spec driver.TaskSpec) error {
	w, err := d.watched(ctx, nodeKey)
	if err != nil {
		return fmt.Errorf("starting task %s on node %s: %w", spec.Key, nodeKey, err)
	}
	codeDir := spec.CodeDir
	if codeDir != "" {
		if codeDir, err = filepath.Abs(codeDir); err != nil {
			return fmt.Errorf("starting task %s: resolving code dir: %w", spec.Key, err)
		}
	}
	if err := driver.CheckTaskPaths(spec); err != nil {
		return driver.Permanent(fmt.Errorf("starting task %s: %w", spec.Key, err))
	}
	req := nodeagent.TaskRequest{Key: spec.Key, Command: spec.Command, Env: spec.Env, CodeDir: codeDir}
	if c := spec.Container; c != nil {
		if d.containerd == "" {
			return driver.Permanent(fmt.Errorf("starting task %s: it runs in a container image, and this engine has no containerd "+
				"(start `mlcompute serve` with --containerd-address)", spec.Key))
		}
		req.Container = &nodeagent.TaskContainer{Address: d.containerd, EngineID: d.engineID,
			Key: driver.MachineTaskKey(nodeKey, spec.Key), Image: c.Image, Hash: c.Hash,
			EnvCache: c.EnvCache, Mounts: c.Mounts}
		if c.Archive != "" {
			if req.Container.Archive, err = filepath.Abs(c.Archive); err != nil {
				return fmt.Errorf("starting task %s: resolving its image archive: %w", spec.Key, err)
			}
		}
	}
	for _, in := range spec.Inputs {
		src, err := filepath.Abs(in.Src)
		if err != nil {
			return fmt.Errorf("starting task %s: resolving input %s: %w", spec.Key, in.Dest, err)
		}
		req.Inputs = append(req.Inputs, nodeagent.TaskInput{Src: src, Dest: in.Dest})
	}
	for _, out := range spec.Outputs {
		req.Outputs = append(req.Outputs, nodeagent.TaskOutput{Path: out.Path, File: out.File})
	}
	_, err = w.client.StartTask(ctx, req)
	if err != nil {
		return fmt.Errorf("starting task %s on node %s: %w", spec.Key, nodeKey, d.mapErr(w.dir, err))
	}
	d.mu.Lock()
	if d.watches[nodeKey] == w {
		d.watchTaskLocked(w, spec.Key)
	}
	d.mu.Unlock()
	return nil
}

// TaskStatus asks the node's agent for a task's state; ErrNotFound if the node or the
// task is unknown.
func (d *Driver) TaskStatus(ctx context.Context, nodeKey, taskKey string) (driver.TaskStatus, error) {
	dir, err := d.nodeDir(nodeKey)
	if err != nil {
		return driver.TaskStatus{}, fmt.Errorf("getting task status: %w", err)
	}
	st, err := d.client(nodeKey, dir).Task(ctx, taskKey)
	if err != nil {
		return driver.TaskStatus{}, fmt.Errorf("getting status of task %s on node %s: %w", taskKey, nodeKey, d.mapErr(dir, err))
	}
	return driver.TaskStatus{Running: st.Running, ExitCode: st.ExitCode}, nil
}

// TaskOutput reads the task's output.log from offset straight from disk, so it works
// whether or not the agent lives, until the node is terminated. It returns at most 1 MiB
// per call (read again from the new offset) and nothing when there is nothing new.
// ErrNotFound if the node or task directory does not exist.
func (d *Driver) TaskOutput(ctx context.Context, nodeKey, taskKey string, offset int64) ([]byte, error) {
	dir, err := d.nodeDir(nodeKey)
	if err != nil {
		return nil, fmt.Errorf("reading task output: %w", err)
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading output of task %s: node %s: %w", taskKey, nodeKey, driver.ErrNotFound)
	}
	out, err := nodeagent.ReadOutput(dir, taskKey, offset)
	if errors.Is(err, nodeagent.ErrNotFound) {
		return nil, fmt.Errorf("reading output of task %s on node %s: %w", taskKey, nodeKey, driver.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading output of task %s on node %s: %w", taskKey, nodeKey, err)
	}
	return out, nil
}

// KillTask SIGKILLs a task's whole process group and returns once it has exited; its
// TaskExited (137) follows on Events if the task is watched. Killing an ended task
// returns nil; ErrNotFound if the node or task is unknown.
func (d *Driver) KillTask(ctx context.Context, nodeKey, taskKey string) error {
	dir, err := d.nodeDir(nodeKey)
	if err != nil {
		return fmt.Errorf("killing task: %w", err)
	}
	if _, err := d.client(nodeKey, dir).Kill(ctx, taskKey); err != nil {
		return fmt.Errorf("killing task %s on node %s: %w", taskKey, nodeKey, d.mapErr(dir, err))
	}
	return nil
}

// Events delivers NodeGone (an agent died without Terminate; the tasks it left have been
// killed by then) and TaskExited (a watched task ended, whatever the cause, including
// KillTask and a stopping agent). It is never closed.
func (d *Driver) Events() <-chan driver.Event { return d.events }

// Close stops every watcher and waits for them. Nodes and tasks keep running: a
// restarted engine adopts them with Describe or List.
func (d *Driver) Close() error {
	d.mu.Lock()
	d.closed = true
	d.watches = map[string]*watch{}
	standby := d.standby
	d.standby = nil
	d.mu.Unlock()
	if standby != nil {
		d.cancelStandby(standby)
	}
	d.cancel()
	d.wg.Wait()
	d.mu.Lock()
	for _, c := range d.clients {
		c.CloseIdleConnections()
	}
	d.mu.Unlock()
	return nil
}

// nodeDir maps a node key to its directory.
// FetchOutput streams rel of the task's working directory from this machine's disk; see
// driver.TaskRunner. The task must have ended: a running task is an ErrPermanent error.
func (d *Driver) FetchOutput(ctx context.Context, nodeKey, taskKey, rel string) (io.ReadCloser, error) {
	st, err := d.TaskStatus(ctx, nodeKey, taskKey)
	if err != nil {
		return nil, fmt.Errorf("fetching output %s of task %s: %w", rel, taskKey, err)
	}
	if st.Running {
		return nil, driver.Permanent(fmt.Errorf("fetching output %s of task %s: the task is still running", rel, taskKey))
	}
	dir, err := d.nodeDir(nodeKey)
	if err != nil {
		return nil, err
	}
	taskDir, err := nodeagent.TaskDir(dir, taskKey)
	if err != nil {
		return nil, err
	}
	return driver.FetchLocalOutput(ctx, filepath.Join(taskDir, nodeagent.WorkDir), rel)
}

func (d *Driver) nodeDir(key string) (string, error) {
	name, err := nodeagent.DirName(key)
	if err != nil {
		return "", fmt.Errorf("checking node key %q: %w", key, err)
	}
	return filepath.Join(d.dir, name), nil
}

func readRecord(dir string) (nodeRecord, error) {
	raw, err := os.ReadFile(filepath.Join(dir, nodeagent.NodeFile))
	if err != nil {
		return nodeRecord{}, err
	}
	var rec nodeRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nodeRecord{}, fmt.Errorf("parsing %s: %w", nodeagent.NodeFile, err)
	}
	return rec, nil
}

// classify marks a failed system call of Create by its errno: no room (a full disk or
// quota, no memory, no processes or file descriptors left) is driver.ErrNoCapacity, since
// another node size or a later try may fit; no permission, a read-only file system or a
// missing or unrunnable agent binary is driver.ErrPermanent, since it fails until the
// operator acts. Anything else is returned as it is.
func classify(err error) error {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.ENOMEM, syscall.EAGAIN, syscall.EMFILE, syscall.ENFILE} {
		if errors.Is(err, errno) {
			return driver.NoCapacity(err)
		}
	}
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOENT, syscall.ENOEXEC, syscall.ENOTDIR} {
		if errors.Is(err, errno) {
			return driver.Permanent(err)
		}
	}
	return err
}

// privateDir creates dir (and its parents) and makes dir itself 0700, whatever its mode was.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// removeAll removes dir, first making read-only directories (kept from a code dir)
// writable so their contents can go.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// withTimeout is context.WithTimeout on the injected clock.
func (d *Driver) withTimeout(ctx context.Context, dur time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	t := d.clk.NewTimer(dur)
	go func() {
		select {
		case <-t.C():
			cancel()
		case <-ctx.Done():
			t.Stop()
		}
	}()
	return ctx, cancel
}
