package slurm

import (
	"context"
	"fmt"
	"io"
	"maps"
	"sort"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/envprep"
)

// liveNode returns a watched node, looking it up (and adopting it) when it is not
// watched yet; ErrNotFound when its job is gone.
func (d *Driver) liveNode(ctx context.Context, key string) (*node, error) {
	return d.nodes.Live(ctx, key, d.Describe)
}

// readyJob returns the job id of a node that is running; ErrTransient while it is pending.
func (d *Driver) readyJob(ctx context.Context, key string) (*node, string, error) {
	n, err := d.liveNode(ctx, key)
	if err != nil {
		return nil, "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !n.Info.Ready {
		return nil, "", driver.Transient(fmt.Errorf("node %s is not ready: its job %s is %s", key, n.job.ID, n.Info.Reason))
	}
	return n, n.job.ID, nil
}

// srunArgs runs a command as a step of job id on its node, with the command's stderr
// merged into its stdout on the node, so srun's own messages (on srun's stderr) stay apart.
// A task's step is named after its remote key (stepName), so KillTask can find it.
func srunArgs(id, stepName string, command []string) []string {
	args := []string{"srun", "--jobid=" + id, "--overlap", "--nodes=1", "--ntasks=1", "--quiet"}
	if stepName != "" {
		args = append(args, "--job-name="+stepName)
	}
	args = append(args, "--", "sh", "-c", `exec 2>&1; exec "$@"`, "mlcompute-task")
	return append(args, command...)
}

// StartTask starts the task as a step of the node's job under the wrapper (see package
// ssh): the wrapper, on the machine that runs the commands, runs srun with its output in
// the task's output.log and srun's own messages in srun.log beside it.
func (d *Driver) StartTask(ctx context.Context, nodeKey string, spec driver.TaskSpec) error {
	n, id, err := d.readyJob(ctx, nodeKey)
	if err != nil {
		return fmt.Errorf("starting task %s: %w", spec.Key, err)
	}
	if len(spec.Command) == 0 {
		return driver.Permanent(fmt.Errorf("starting task %s: no command", spec.Key))
	}
	rkey := driver.MachineTaskKey(nodeKey, spec.Key)
	dir := d.tasks.Dir + "/" + rkey
	task := ssh.RemoteTask{Key: rkey, Env: d.taskEnv(spec.Env), MakeDirs: ssh.OutputDirs(spec.Outputs)}
	if ssh.HasTaskFiles(spec) {
		task.WorkDir = d.tasks.Dir + "/" + rkey + ".code"
		// Copied before the start, which runs the task only once: a second copy (of a
		// start that races or repeats) writes the same files.
		if _, _, err := d.tasks.Status(ctx, rkey); driver.IsNotFound(err) {
			if err := ssh.PutTaskFiles(ctx, d.sh, spec, task.WorkDir); err != nil {
				return fmt.Errorf("starting task %s: %w", spec.Key, driver.Transient(err))
			}
		}
	}
	command := spec.Command
	if spec.Container != nil {
		if d.cfg.Containers == nil {
			return driver.Permanent(fmt.Errorf("starting task %s: it runs in a container image, and this engine cannot run images on Slurm nodes", spec.Key))
		}
		if command, err = d.cfg.Containers.Command(ctx, d.sh, strings.TrimRight(d.cfg.Workdir, "/")+"/.mlcompute", rkey, spec.Container, command); err != nil {
			return fmt.Errorf("starting task %s: %w", spec.Key, err)
		}
	}
	task.Command = append([]string{"sh", "-c", `exec 2>>"$0"; exec "$@"`, dir + "/srun.log"}, srunArgs(id, rkey, command)...)
	if err := d.tasks.Start(ctx, task); err != nil {
		return fmt.Errorf("starting task %s: %w", spec.Key, driver.Transient(err))
	}
	d.watchTask(n, nodeKey, spec.Key)
	return nil
}

// taskEnv is a task's environment with the cache of environments (DESIGN 8) in the work
// dir every node shares, beside the tasks: a build one node made is found by the others,
// and it does not depend on the nodes sharing a home directory.
func (d *Driver) taskEnv(env map[string]string) map[string]string {
	if _, ok := env[envprep.CacheVar]; ok {
		return env
	}
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	out[envprep.CacheVar] = strings.TrimRight(d.cfg.Workdir, "/") + "/.mlcompute/envs"
	return out
}

// watchTask waits for a task's end on the machine (a loop in sh, see ssh.TaskStore.Wait)
// and reports it as TaskExited; it ends with the node, or unreported when the machine no
// longer has the task (no LostFunc). A task that ended by a signal is reported only while
// its node still holds its allocation (heldAfterSignal).
func (d *Driver) watchTask(n *node, nodeKey, taskKey string) {
	rkey := driver.MachineTaskKey(nodeKey, taskKey)
	n.Tasks.Watch(taskKey,
		func(ctx context.Context) (bool, int, error) { return d.tasks.Wait(ctx, rkey) },
		func(ctx context.Context, code int) {
			if code > 128 && !d.heldAfterSignal(ctx) {
				return // the allocation ended under the task: the watch said NodeGone
			}
			d.emit(driver.Event{Kind: driver.TaskExited, NodeKey: nodeKey, TaskKey: taskKey, ExitCode: code})
		}, nil)
}

// heldAfterSignal says whether a node still holds its allocation after one of its tasks
// ended by a signal (exit status above 128). scancel of the allocation also ends the
// task's srun with SIGTERM's status, and which of the two the engine heard first would
// decide whether the job failed by its own exit or with its node lost. So the task's end
// waits for a squeue of the watch that ran wholly after it (three answers from now: the
// one in flight, one after it, and the end of that one's handling, which cancels ctx when
// it found the job over); a controller that does not answer for maxSignalWait poll
// intervals lets the exit through.
func (d *Driver) heldAfterSignal(ctx context.Context) bool {
	want := d.ticks.Load() + 3
	for range maxSignalWait {
		if d.ticks.Load() >= want {
			break
		}
		select {
		case <-ctx.Done():
			return false
		case <-d.cfg.Clock.After(d.cfg.PollInterval):
		}
	}
	return ctx.Err() == nil
}

// maxSignalWait bounds heldAfterSignal's wait, in poll intervals.
const maxSignalWait = 20

// adoptTasks watches the running tasks of a node the driver adopted (after a restart):
// those of its machine task keys, without the copies of code directories. Callers do not
// hold d.mu: the list runs a command.
func (d *Driver) adoptTasks(ctx context.Context, n *node, key string) {
	n.Tasks.Adopt(ctx, func(ctx context.Context) ([]string, error) {
		keys, err := d.tasks.RunningTasks(ctx, key+".")
		var tasks []string
		for _, k := range keys {
			if task := strings.TrimPrefix(k, key+"."); !strings.HasSuffix(task, ".code") {
				tasks = append(tasks, task)
			}
		}
		return tasks, err
	}, func(task string) { d.watchTask(n, key, task) })
}

// TaskStatus reads the task's state from its files.
func (d *Driver) TaskStatus(ctx context.Context, nodeKey, taskKey string) (driver.TaskStatus, error) {
	if _, err := d.liveNode(ctx, nodeKey); err != nil {
		return driver.TaskStatus{}, fmt.Errorf("reading status of task %s: %w", taskKey, err)
	}
	running, code, err := d.tasks.Status(ctx, driver.MachineTaskKey(nodeKey, taskKey))
	if err != nil {
		return driver.TaskStatus{}, err
	}
	return driver.TaskStatus{Running: running, ExitCode: code}, nil
}

// TaskOutput reads the task's output file from offset on.
func (d *Driver) TaskOutput(ctx context.Context, nodeKey, taskKey string, offset int64) ([]byte, error) {
	if _, err := d.liveNode(ctx, nodeKey); err != nil {
		return nil, fmt.Errorf("reading output of task %s: %w", taskKey, err)
	}
	return d.tasks.Output(ctx, driver.MachineTaskKey(nodeKey, taskKey), offset)
}

// FetchOutput streams rel of the ended task's working directory, in the shared
// --slurm-workdir, from the machine that runs Slurm's commands (this one or the login
// node over SSH): find and tar there, see ssh.TaskStore.Fetch.
func (d *Driver) FetchOutput(ctx context.Context, nodeKey, taskKey, rel string) (io.ReadCloser, error) {
	if _, err := d.liveNode(ctx, nodeKey); err != nil {
		return nil, fmt.Errorf("fetching output of task %s: %w", taskKey, err)
	}
	return d.tasks.FetchStream(ctx, driver.MachineTaskKey(nodeKey, taskKey), rel), nil
}

// KillTask sends SIGTERM to the task's step (stopStep), then to whatever is left of it
// through its srun, with SIGKILL 10 s later, and returns once its exit status is recorded.
func (d *Driver) KillTask(ctx context.Context, nodeKey, taskKey string) error {
	n, err := d.liveNode(ctx, nodeKey)
	if err != nil {
		return fmt.Errorf("killing task %s: %w", taskKey, err)
	}
	d.mu.Lock()
	jobID := n.job.ID
	d.mu.Unlock()
	rkey := driver.MachineTaskKey(nodeKey, taskKey)
	d.stopStep(ctx, jobID, rkey)
	return d.tasks.Kill(ctx, rkey)
}

// stopStep sends SIGTERM to the processes of the task's step on its node and waits, up to
// the kill grace, for the task to end. srun itself must not get it: srun cancels its step
// on SIGTERM, which kills the processes within a second, so a task would get no time to
// stop (a container task, none to remove its container). What is still running after the
// wait is killed as any task is (TaskStore.Kill). A step not found (not started yet, or
// over) is left to that kill.
func (d *Driver) stopStep(ctx context.Context, jobID, rkey string) {
	out, err := d.command(ctx, "squeue", "-h", "-s", "-j", jobID, "-o", "%i %j")
	if err != nil {
		return
	}
	step := ""
	for _, line := range strings.Split(out, "\n") {
		if id, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok && name == rkey {
			step = id
		}
	}
	if step == "" {
		return
	}
	if _, err := d.command(ctx, "scancel", "--signal=TERM", step); err != nil {
		d.log.Debug("signalling a task's step failed", "step", step, "error", err)
		return
	}
	// The wait runs on the node, so ending it is one remote command, not a poll.
	wait, cancel := context.WithTimeout(ctx, d.cfg.KillGrace)
	defer cancel()
	_, _, _ = d.tasks.Wait(wait, rkey)
}

// Exec runs a command as a step of the node's job with spec.Stdin as its input and its
// output (stdout and stderr) to spec.Output; srun's own messages are dropped. When ctx
// ends, srun gets SIGTERM, which it passes to the step.
func (d *Driver) Exec(ctx context.Context, nodeKey string, spec driver.ExecSpec) (int, error) {
	_, id, err := d.readyJob(ctx, nodeKey)
	if err != nil {
		return 0, fmt.Errorf("exec on node %s: %w", nodeKey, err)
	}
	args := []string{"env"}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, k+"="+spec.Env[k])
	}
	args = append(args, srunArgs(id, "", spec.Command)...)
	stdin := spec.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	out := spec.Output
	if out == nil {
		out = io.Discard
	}
	_, code, err := d.sh.RunShell(ctx, quoteArgs(args), stdin, out)
	if err != nil {
		return 0, fmt.Errorf("exec on node %s: %w", nodeKey, err)
	}
	return code, nil
}
