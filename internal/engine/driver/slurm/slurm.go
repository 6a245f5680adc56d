// Package slurm is the node driver of Slurm clusters: a node is one Slurm job of one node,
// held by a holder that sleeps until the job is cancelled, and a task is a step inside it.
//
// It talks to Slurm only through its commands (sbatch, srun, squeue, scancel, sinfo), run
// on the engine's machine or, with Config.Login, on a login node over SSH, so it works
// with any Slurm from 20.11 on and needs neither root nor slurmrestd.
//
//   - Create submits `sbatch --parsable --nodes=1 --no-requeue` named <engine id>/<node key>
//     and commented <owner>/<node key>, so the engine finds its own jobs with squeue after
//     a crash (Describe, List). It first looks the name up: a job that exists is returned,
//     never submitted again. It returns at once: a pending job is a node that is not ready
//     (Reason is squeue's REASON); NodeReady follows when the job runs.
//   - The driver watches its jobs with one `squeue --me --name=...` per tick for all of
//     them (Config.PollInterval, 250 ms by default; Slurm's commands offer no event stream). A watched job that
//     ends by itself (time limit, preemption, a node set DOWN or failing, a killed slurmd)
//     is NodeGone; one still pending after Config.StartTimeout is cancelled and NodeGone.
//   - Tasks run under the wrapper of package ssh (TaskStore) in <workdir>/.mlcompute/tasks,
//     a directory the login and the nodes share: the wrapper runs on the machine that runs
//     the commands and starts `srun --jobid=ID --overlap` there, whose output and exit
//     status it records in files, so an engine restart loses nothing. A task that ends by
//     a signal is reported only after a squeue that ran after its end (heldAfterSignal):
//     scancel of the job kills its steps too, and that is the node's end, not the task's.
//   - Terminate signals the steps, cancels the job and waits until squeue no longer shows
//     it, escalating to `scancel --signal=KILL --full` after Config.KillGrace.
//   - sbatch refusing a job (a bad partition, account, QOS) is driver.ErrPermanent with
//     Slurm's message; a controller that cannot be reached is driver.ErrTransient.
package slurm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/keylock"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/remotetask"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/lazyregexp"
)

// Values of Config.Resources.
const (
	// ResourcesSize: --gres=gpu:N, --cpus-per-task and --mem from the size.
	ResourcesSize = "size"
	// ResourcesGPUs: --gres=gpu:N only; CPUs and memory are the partition's defaults (a
	// cluster whose nodes are smaller than the catalog's sizes, such as a test cluster).
	ResourcesGPUs = "gpus"
)

// Defaults of Config.
const (
	DefaultStartTimeout = 10 * time.Minute
	DefaultPollInterval = 250 * time.Millisecond
	DefaultKillGrace    = 10 * time.Second
)

// Config configures a Driver. EngineID is required.
type Config struct {
	// EngineID names the engine's jobs (<EngineID>/<node key>): letters, digits, '.', '_'
	// and '-'. It must stay the same across restarts, so the engine finds its jobs again.
	EngineID string
	// Partition, Account, QOS, Time and Constraint are passed to sbatch when set
	// (--partition, --account, --qos, --time, --constraint).
	Partition, Account, QOS, Time, Constraint string
	// SbatchArgs are more sbatch arguments (tests submit held jobs with --hold).
	SbatchArgs []string
	// Resources says what of a node's size its job asks for: ResourcesSize (the default)
	// its GPUs, vCPUs and memory; ResourcesGPUs its GPUs only. Either way an isolated size
	// gets the node alone (--exclusive).
	Resources string
	// Workdir is a directory the machine running the commands and every node share;
	// tasks keep their files in Workdir/.mlcompute/tasks. Empty means the home directory
	// of the user running the commands.
	Workdir string
	// Login, user@host[:port], runs the commands on a login node over SSH, with the key in
	// LoginKeyFile, else ~/.ssh/id_ed25519 or id_rsa; empty runs them here. serve sets
	// LoginKeyFile from MLCOMPUTE_SLURM_SSH_KEY: the driver reads no variable itself.
	Login        string
	LoginKeyFile string
	// LoginHostKeyFile keeps the login node's host key fingerprint, trusted on first use:
	// read at start, written by the first connection when it holds none; a login node
	// that presents another key is refused. Empty pins the key for the driver's life only.
	LoginHostKeyFile string
	// StartTimeout cancels a job that is not running this long after its submission
	// (default DefaultStartTimeout).
	StartTimeout time.Duration
	// PollInterval is how often squeue is read while the driver watches jobs (default
	// DefaultPollInterval).
	PollInterval time.Duration
	// KillGrace is how long Terminate waits after scancel before it kills, and how long
	// KillTask waits after it signalled a task's step (default DefaultKillGrace).
	KillGrace time.Duration
	// Clock times the watch and the timeouts; the real clock when nil.
	Clock  clock.WithTicker
	Logger hclog.Logger
	// Containers runs the tasks that come with an image (TaskSpec.Container) on the nodes,
	// its binary and images kept in Workdir/.mlcompute; nil: such a task is refused.
	Containers *ssh.ContainerRunner

	// shell overrides how commands run (tests).
	shell ssh.Shell
}

var idRE = lazyregexp.New(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`)

// NewEngineID returns a fresh engine id for Config.EngineID (keep it: see there).
func NewEngineID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "mlc-" + hex.EncodeToString(b)
}

// Driver is the slurm node driver.
type Driver struct {
	cfg    Config
	log    hclog.Logger
	sh     ssh.Shell
	tasks  ssh.TaskStore
	events chan driver.Event
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	keys keylock.Locks // per node key, so Creates and Terminates of one key take turns

	ticks atomic.Int64 // squeues of the watch that answered (tests wait on it)

	mu    sync.Mutex
	nodes *remotetask.Table[*node] // watched nodes by key, under mu
	hosts map[string]string        // Slurm node name -> host name
}

// node is a watched job. Its Seen is the job's submission time when squeue's clock can be
// trusted (see adopt).
type node struct {
	remotetask.Node
	job job
}

var _ driver.Driver = (*Driver)(nil)

// New returns a driver; it checks that the Slurm commands answer (squeue) and finds the
// working directory. Close stops its watch, leaving jobs and tasks running.
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if !idRE.MatchString(cfg.EngineID) {
		return nil, fmt.Errorf("slurm driver: invalid engine id %q", cfg.EngineID)
	}
	switch cfg.Resources {
	case "":
		cfg.Resources = ResourcesSize
	case ResourcesSize, ResourcesGPUs:
	default:
		return nil, fmt.Errorf("slurm driver: resources %q is not one of %s, %s", cfg.Resources, ResourcesSize, ResourcesGPUs)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	sh := cfg.shell
	if sh == nil {
		if cfg.Login == "" {
			sh = localShell{}
		} else {
			ls, err := newLoginShell(cfg.Login, cfg.LoginKeyFile, cfg.LoginHostKeyFile)
			if err != nil {
				return nil, err
			}
			sh = ls
		}
	}
	wctx, cancel := context.WithCancel(context.Background())
	d := &Driver{
		cfg: cfg, log: cfg.Logger.Named("slurm"), sh: sh, events: make(chan driver.Event, 256),
		ctx: wctx, cancel: cancel, hosts: map[string]string{},
	}
	d.nodes = remotetask.NewTable[*node](&d.mu, wctx, cfg.Clock, &d.wg, d.log)
	if d.cfg.Workdir == "" {
		home, err := d.command(ctx, "sh", "-c", `printf %s "$HOME"`)
		if err != nil || home == "" {
			cancel()
			return nil, fmt.Errorf("slurm driver: finding the home directory for --slurm-workdir: %w", err)
		}
		d.cfg.Workdir = home
	}
	d.tasks = ssh.TaskStore{Shell: sh, Dir: strings.TrimRight(d.cfg.Workdir, "/") + "/.mlcompute/tasks"}
	if _, err := d.command(ctx, "squeue", "-h", "--me", "-o", "%i"); err != nil {
		cancel()
		return nil, fmt.Errorf("slurm driver: squeue does not answer: %w", classify(err))
	}
	d.wg.Add(1)
	go d.watch()
	return d, nil
}

// Name is "slurm".
func (d *Driver) Name() string { return "slurm" }

// Events delivers NodeReady, NodeGone and TaskExited.
func (d *Driver) Events() <-chan driver.Event { return d.events }

// Close stops the watch and the task watchers; jobs and tasks keep running.
func (d *Driver) Close() error {
	d.cancel()
	d.wg.Wait()
	return nil
}

// jobName is the Slurm job name of a node.
func (d *Driver) jobName(key string) string { return d.cfg.EngineID + "/" + key }

func (d *Driver) lockKey(key string) func() { return d.keys.Lock(key) }

// Create submits the node's job unless a job of that name exists; see the package doc.
func (d *Driver) Create(ctx context.Context, spec driver.NodeSpec) (driver.NodeInfo, error) {
	if err := checkKey(spec.Key); err != nil {
		return driver.NodeInfo{}, driver.Permanent(err)
	}
	unlock := d.lockKey(spec.Key)
	defer unlock()
	j, ok, err := d.findJob(ctx, spec.Key)
	if err != nil {
		return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, err)
	}
	if !ok {
		id, err := d.sbatch(ctx, spec)
		if err != nil {
			return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, err)
		}
		d.log.Debug("job submitted", "node", spec.Key, "job_id", id)
		if j, ok, err = d.findJob(ctx, spec.Key); err != nil || !ok {
			// Submitted but not seen yet: pending, as every fresh job is.
			j = job{ID: id, State: "PENDING", Reason: "None", Name: d.jobName(spec.Key), Comment: spec.Owner + "/" + spec.Key}
		}
	}
	return d.adopt(ctx, spec.Key, j, false), nil
}

func (d *Driver) sbatch(ctx context.Context, spec driver.NodeSpec) (string, error) {
	args := []string{"sbatch", "--parsable", "--nodes=1", "--no-requeue",
		"--job-name=" + d.jobName(spec.Key), "--comment=" + spec.Owner + "/" + spec.Key,
		"--output=/dev/null", "--chdir=" + d.cfg.Workdir}
	for _, o := range []struct{ flag, value string }{
		{"--partition", d.cfg.Partition}, {"--account", d.cfg.Account}, {"--qos", d.cfg.QOS},
		{"--time", d.cfg.Time}, {"--constraint", d.cfg.Constraint},
	} {
		if o.value != "" {
			args = append(args, o.flag+"="+o.value)
		}
	}
	args = append(args, sizeArgs(spec, d.cfg.Resources)...)
	args = append(args, d.cfg.SbatchArgs...)
	// The holder: the batch step sleeps until the job is cancelled.
	args = append(args, "--wrap", "exec sleep 2147483647")
	out, err := d.command(ctx, args...)
	if err != nil {
		return "", classify(err)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";") // "<id>[;<cluster>]"
	if id == "" {
		return "", fmt.Errorf("sbatch printed no job id")
	}
	return id, nil
}

// sizeArgs are the sbatch flags that make a node's job its size (DESIGN 5): its GPUs as
// GRES (Slurm then sets the job's CUDA_VISIBLE_DEVICES, which the driver leaves alone), its
// vCPUs and memory unless resources is ResourcesGPUs, and the node alone for an isolated
// size. A size the catalog does not know asks for what the spec says.
func sizeArgs(spec driver.NodeSpec, resources string) []string {
	size, known := catalog.Lookup(spec.VMSize)
	var args []string
	if known && size.GPUs > 0 {
		args = append(args, fmt.Sprintf("--gres=gpu:%d", size.GPUs))
	}
	if resources != ResourcesGPUs {
		if spec.VCPUs > 0 {
			args = append(args, fmt.Sprintf("--cpus-per-task=%d", spec.VCPUs))
		}
		if spec.MemoryGB > 0 {
			args = append(args, fmt.Sprintf("--mem=%dM", int64(math.Ceil(spec.MemoryGB*1024))))
		}
	}
	if known && size.Isolated {
		args = append(args, "--exclusive")
	}
	return args
}

// findJob returns the live job of a node key, if any. Of several (which only a crash
// between two submissions under one name could make), the first submitted is the node
// and the others are cancelled.
func (d *Driver) findJob(ctx context.Context, key string) (job, bool, error) {
	out, err := d.command(ctx, "squeue", "-h", "--me", "--name="+d.jobName(key), "-o", squeueFormat)
	if err != nil {
		return job{}, false, classify(err)
	}
	var found []job
	for _, j := range parseJobs(out) {
		if j.Name == d.jobName(key) && j.live() {
			found = append(found, j)
		}
	}
	if len(found) == 0 {
		return job{}, false, nil
	}
	for _, extra := range found[1:] {
		d.log.Warn("cancelling a second job under one node key", "node", key, "job_id", extra.ID)
		_, _ = d.command(ctx, "scancel", extra.ID)
	}
	return found[0], true, nil
}

// findAnyJob returns a job of the node key that squeue still shows, in any state: a
// completing job still holds its node. Terminate waits for none to be left.
func (d *Driver) findAnyJob(ctx context.Context, key string) (job, bool, error) {
	out, err := d.command(ctx, "squeue", "-h", "--me", "--name="+d.jobName(key), "-o", squeueFormat)
	if err != nil {
		return job{}, false, classify(err)
	}
	for _, j := range parseJobs(out) {
		if j.Name == d.jobName(key) && (j.live() || j.State == "COMPLETING" || j.State == "SIGNALING" || j.State == "STAGE_OUT") {
			return j, true, nil
		}
	}
	return job{}, false, nil
}

// adopt watches the node's job (when not already) and returns what it knows of it; with
// tasks, it also watches the tasks the node runs (a node the driver did not create).
func (d *Driver) adopt(ctx context.Context, key string, j job, tasks bool) driver.NodeInfo {
	host := ""
	if j.running() {
		host = d.hostOf(ctx, j.Node)
	}
	d.mu.Lock()
	n, ok := d.nodes.Get(key)
	if !ok || n.job.ID != j.ID {
		n = &node{job: j, Node: d.nodes.NewNode(key,
			driver.NodeInfo{Key: key, Owner: strings.TrimSuffix(j.Comment, "/"+key), Address: "slurm-job-" + j.ID})}
		// squeue prints the submission time in the local time of the machine that runs
		// it: trusted only when that is this machine (a login node may be in another
		// time zone); else the start timeout counts from when the driver first saw it.
		if d.cfg.Login == "" && !j.Submit.IsZero() && j.Submit.Before(n.Seen) {
			n.Seen = j.Submit
		}
		d.nodes.Put(n)
	}
	n.job = j
	d.update(n, host)
	info := n.Info
	d.mu.Unlock()
	if tasks {
		d.adoptTasks(ctx, n, key)
	}
	return info
}

// update sets a node's info from its job; host is the node's host name once running.
func (d *Driver) update(n *node, host string) {
	if n.job.running() && host != "" {
		n.Info.Ready, n.Info.Reason, n.Info.Address = true, "", host
		if n.Info.StartedAt.IsZero() {
			n.Info.StartedAt = d.cfg.Clock.Now().UTC()
		}
		return
	}
	if !n.Info.Ready {
		n.Info.Reason = n.job.Reason
		if n.Info.Reason == "" || n.Info.Reason == "None" {
			n.Info.Reason = strings.ToLower(n.job.State)
		}
	}
}

// hostOf returns the host name of a Slurm node (NodeHostname; the node name when sinfo
// does not say).
func (d *Driver) hostOf(ctx context.Context, name string) string {
	d.mu.Lock()
	h, ok := d.hosts[name]
	d.mu.Unlock()
	if ok {
		return h
	}
	out, err := d.command(ctx, "sinfo", "-h", "-N", "-n", name, "-o", "%n")
	if err != nil {
		// The node is not ready until its host is known; say why it waits.
		d.log.Debug("finding a Slurm node's host failed", "slurm_node", name, "error", err)
		return ""
	}
	h = strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	if h == "" || h == "(null)" {
		h = name
	}
	d.mu.Lock()
	d.hosts[name] = h
	d.mu.Unlock()
	return h
}

// Describe returns a live node (watching it) or ErrNotFound.
func (d *Driver) Describe(ctx context.Context, key string) (driver.NodeInfo, error) {
	if err := checkKey(key); err != nil {
		return driver.NodeInfo{}, driver.NotFound(err)
	}
	j, ok, err := d.findJob(ctx, key)
	if err != nil {
		return driver.NodeInfo{}, fmt.Errorf("describing node %s: %w", key, err)
	}
	if !ok {
		d.nodes.Forget(key)
		return driver.NodeInfo{}, fmt.Errorf("describing node %s: %w", key, driver.ErrNotFound)
	}
	return d.adopt(ctx, key, j, true), nil
}

// List returns the live nodes of owner ("" for all of this engine's), watching them.
func (d *Driver) List(ctx context.Context, owner string) ([]driver.NodeInfo, error) {
	jobs, err := d.ownJobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var out []driver.NodeInfo
	for key, j := range jobs {
		if !j.live() || (owner != "" && j.Comment != owner+"/"+key) {
			continue
		}
		out = append(out, d.adopt(ctx, key, j, true))
	}
	return out, nil
}

// ownJobs reads this engine's jobs with one squeue, by node key: those of the keys given
// (up to 200 names on one command line), else all of them.
func (d *Driver) ownJobs(ctx context.Context, keys ...string) (map[string]job, error) {
	args := []string{"squeue", "-h", "--me", "-o", squeueFormat}
	if len(keys) > 0 && len(keys) <= 200 {
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = d.jobName(k)
		}
		args = append(args, "--name="+strings.Join(names, ","))
	}
	out, err := d.command(ctx, args...)
	if err != nil {
		return nil, classify(err)
	}
	jobs := map[string]job{}
	prefix := d.cfg.EngineID + "/"
	for _, j := range parseJobs(out) {
		key, ok := strings.CutPrefix(j.Name, prefix)
		if !ok || key == "" {
			continue
		}
		if prev, dup := jobs[key]; dup && prev.live() {
			continue
		}
		jobs[key] = j
	}
	return jobs, nil
}

// Terminate cancels the node's job and returns once squeue no longer shows it live.
func (d *Driver) Terminate(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return nil // no node ever had this key
	}
	unlock := d.lockKey(key)
	defer unlock()
	// The node's tasks are still watched: their ends while the job is cancelled are theirs
	// to report (heldAfterSignal).
	d.nodes.MarkTerminating(key, false)
	start := d.cfg.Clock.Now()
	killed := false
	for first := true; ; first = false {
		j, ok, err := d.findAnyJob(ctx, key)
		switch {
		case err != nil:
			// The controller may be restarting: keep trying until ctx ends.
			d.log.Debug("squeue failed while terminating", "node", key, "error", err)
		case !ok:
			d.nodes.Forget(key)
			d.removeTasks(ctx, key)
			if !first {
				d.log.Debug("node released", "node", key, "after", d.cfg.Clock.Since(start))
			}
			return nil
		case first && j.live():
			// TERM the steps (the tasks), then cancel the job.
			if j.running() {
				_, _ = d.command(ctx, "scancel", "--signal=TERM", j.ID)
			}
			if _, err := d.command(ctx, "scancel", j.ID); err != nil {
				d.log.Warn("scancel failed", "node", key, "job_id", j.ID, "error", err)
			}
		case !killed && d.cfg.Clock.Since(start) >= d.cfg.KillGrace:
			d.log.Warn("job not gone after scancel, killing it", "node", key, "job_id", j.ID)
			_, _ = d.command(ctx, "scancel", "--signal=KILL", "--full", j.ID)
			killed = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("terminating node %s: %w", key, driver.Transient(ctx.Err()))
		case <-d.cfg.Clock.After(50 * time.Millisecond):
		}
	}
}

// removeTasks removes the task directories of a node that is gone.
func (d *Driver) removeTasks(ctx context.Context, key string) {
	dir := d.tasks.Dir
	_, err := d.command(ctx, "sh", "-c", `rm -rf -- "$0/$1".*`, dir, key)
	if err != nil {
		d.log.Warn("removing the task directories of a released node", "node", key, "error", err)
	}
}

// watch reads squeue every PollInterval while there are nodes to watch, and reports what
// changed.
func (d *Driver) watch() {
	defer d.wg.Done()
	t := d.cfg.Clock.NewTicker(d.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C():
		}
		d.mu.Lock()
		idle := d.nodes.Len() == 0
		d.mu.Unlock()
		if idle {
			continue
		}
		ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
		d.tick(ctx)
		cancel()
	}
}

// tick compares one squeue with the watched nodes.
func (d *Driver) tick(ctx context.Context) {
	// Only the nodes watched before squeue ran are judged by it: a node created during
	// the call is not in its answer, and is not gone.
	d.mu.Lock()
	keys := make([]string, 0, d.nodes.Len())
	before := make(map[string]*node, d.nodes.Len())
	for k, n := range d.nodes.All() {
		keys = append(keys, k)
		before[k] = n
	}
	d.mu.Unlock()
	jobs, err := d.ownJobs(ctx, keys...)
	if err != nil {
		// A controller that is down or restarting: nothing is known, nothing changes.
		d.log.Debug("squeue failed", "error", err)
		return
	}
	d.ticks.Add(1)
	type change struct {
		n       *node
		key     string
		ready   bool
		timeout string // job id to cancel
		why     string
		waiting string // a pending job's new reason
	}
	var changes []change
	d.mu.Lock()
	now := d.cfg.Clock.Now()
	for key, n := range d.nodes.All() {
		if n.Terminating || before[key] != n {
			continue
		}
		j, ok := jobs[key]
		switch {
		case !ok || j.ID != n.job.ID || !j.live():
			why := "gone from squeue"
			if ok {
				why = strings.ToLower(j.State)
			}
			changes = append(changes, change{n: n, key: key, why: why})
		case !j.running() && now.Sub(n.Seen) >= d.cfg.StartTimeout:
			changes = append(changes, change{n: n, key: key, timeout: j.ID, why: "not running within the start timeout (" + j.Reason + ")"})
		case j.running() && !n.Info.Ready:
			n.job = j
			changes = append(changes, change{n: n, key: key, ready: true})
		default:
			before := n.Info.Reason
			n.job = j
			d.update(n, "")
			if !n.Info.Ready && n.Info.Reason != before && j.Reason != "" && j.Reason != "None" {
				changes = append(changes, change{n: n, key: key, waiting: n.Info.Reason})
			}
		}
	}
	d.mu.Unlock()
	for _, c := range changes {
		switch {
		case c.waiting != "":
			// squeue's pending reason (Resources, PartitionConfig, QOSMaxJobsPerUserLimit):
			// the node says why within a tick, not only when it was created.
			d.emit(driver.Event{Kind: driver.NodeWaiting, NodeKey: c.key, Reason: c.waiting})
		case c.ready:
			n := c.n
			d.mu.Lock()
			node := n.job.Node
			d.mu.Unlock()
			host := d.hostOf(ctx, node)
			if host == "" {
				continue // next tick
			}
			d.mu.Lock()
			if !d.nodes.Current(n) || n.Info.Ready {
				d.mu.Unlock()
				continue
			}
			d.update(n, host)
			d.mu.Unlock()
			d.log.Debug("node ready", "node", c.key, "host", host)
			d.emit(driver.Event{Kind: driver.NodeReady, NodeKey: c.key})
		default:
			if c.timeout != "" {
				if _, err := d.command(ctx, "scancel", c.timeout); err != nil {
					d.log.Warn("cancelling a job that did not start", "node", c.key, "error", err)
					continue // next tick tries again
				}
			}
			d.mu.Lock()
			n := c.n
			if !d.nodes.Current(n) {
				d.mu.Unlock()
				continue
			}
			d.nodes.Drop(n)
			d.mu.Unlock()
			d.log.Warn("node gone", "node", c.key, "reason", c.why)
			d.emit(driver.Event{Kind: driver.NodeGone, NodeKey: c.key, Reason: c.why})
		}
	}
}

func (d *Driver) emit(ev driver.Event) {
	select {
	case d.events <- ev:
	case <-d.ctx.Done():
	}
}

var keyRE = lazyregexp.New(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$`)

func checkKey(key string) error {
	if !keyRE.MatchString(key) {
		return errors.New("invalid node key " + fmt.Sprintf("%q", key))
	}
	return nil
}
