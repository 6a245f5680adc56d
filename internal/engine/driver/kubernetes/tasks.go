package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/envprep"
)

// podShell runs sh command lines in a node's pod through pods/exec: the Shell the task
// wrapper of package ssh runs through.
type podShell struct {
	d   *Driver
	pod string
}

func (s podShell) RunShell(ctx context.Context, cmd string, stdin io.Reader, stdout io.Writer) ([]byte, int, error) {
	var stderr bytes.Buffer
	code, err := s.d.exec(ctx, s.pod, []string{"sh", "-c", cmd}, stdin, stdout, &stderr)
	return stderr.Bytes(), code, err
}

// exec runs a command in a pod's container and returns its exit status; an error only
// when the command could not be run or its stream broke.
func (d *Driver) exec(ctx context.Context, pod string, command []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	client, ok := d.cs.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || client == nil {
		// client-go's fake clientset (unit tests) has no connection to exec through.
		return 0, driver.Permanent(fmt.Errorf("exec in pod %s: the client has no REST connection", pod))
	}
	req := client.Post().Resource("pods").Namespace(d.cfg.Namespace).Name(pod).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: containerName, Command: command,
		Stdin: stdin != nil, Stdout: stdout != nil, Stderr: stderr != nil,
	}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(d.rest, "GET", req.URL().String())
	if err != nil {
		return 0, driver.Permanent(fmt.Errorf("exec in pod %s: %w", pod, err))
	}
	spdy, err := remotecommand.NewSPDYExecutor(d.rest, "POST", req.URL())
	if err != nil {
		return 0, driver.Permanent(fmt.Errorf("exec in pod %s: %w", pod, err))
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return 0, driver.Permanent(fmt.Errorf("exec in pod %s: %w", pod, err))
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		return exit.ExitStatus(), nil
	case apierrors.IsNotFound(err), strings.Contains(err.Error(), "not found"):
		return 0, fmt.Errorf("exec in pod %s: %w", pod, driver.NotFound(err))
	}
	return 0, fmt.Errorf("exec in pod %s: %w", pod, driver.Transient(err))
}

// liveNode returns a watched node, looking it up (and adopting it) when it is not
// watched yet; ErrNotFound when its pod is gone.
func (d *Driver) liveNode(ctx context.Context, key string) (*node, error) {
	if err := checkKey(key); err != nil {
		return nil, driver.NotFound(err)
	}
	return d.nodes.Live(ctx, key, d.Describe)
}

// readyNode returns a node whose pod runs; ErrTransient while it is pending.
func (d *Driver) readyNode(ctx context.Context, key string) (*node, error) {
	n, err := d.liveNode(ctx, key)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !n.Info.Ready {
		return nil, driver.Transient(fmt.Errorf("node %s is not ready: its pod is %s", key, n.Info.Reason))
	}
	return n, nil
}

// StartTask starts the task in the node's pod under the wrapper of package ssh, whose
// files (output, exit status) live in the pod's /mlcompute/tasks/<task key>; the code
// directory and the inputs are copied first into /mlcompute/code/<task key>, with tar over
// exec's stdin. A task with an image runs in a container of its own in the pod
// (container.go).
func (d *Driver) StartTask(ctx context.Context, nodeKey string, spec driver.TaskSpec) error {
	n, err := d.readyNode(ctx, nodeKey)
	if err != nil {
		return fmt.Errorf("starting task %s: %w", spec.Key, err)
	}
	if len(spec.Command) == 0 {
		return driver.Permanent(fmt.Errorf("starting task %s: no command", spec.Key))
	}
	tasks := d.taskStore(n.name)
	task := ssh.RemoteTask{Key: spec.Key, Command: spec.Command, Env: taskEnv(spec.Env), MakeDirs: ssh.OutputDirs(spec.Outputs)}
	if ssh.HasTaskFiles(spec) {
		task.WorkDir = filesDir + "/code/" + spec.Key
		// Copied before the start, which runs the task only once: a second copy (of a
		// start that races or repeats) writes the same files.
		if _, _, err := tasks.Status(ctx, spec.Key); driver.IsNotFound(err) {
			if err := ssh.PutTaskFiles(ctx, podShell{d: d, pod: n.name}, spec, task.WorkDir); err != nil {
				return fmt.Errorf("starting task %s: %w", spec.Key, driver.Transient(err))
			}
		}
	}
	if spec.Container != nil {
		err = d.startInImage(ctx, n, tasks, spec, task)
	} else {
		err = tasks.Start(ctx, task)
	}
	if err != nil {
		// A refusal stays marked as one (no importer, an image the Role may not add);
		// anything else may pass at a later try.
		if !driver.IsPermanent(err) {
			err = driver.Transient(err)
		}
		return fmt.Errorf("starting task %s on node %s: %w", spec.Key, nodeKey, err)
	}
	d.watchTask(n, spec.Key)
	return nil
}

// taskEnv is a task's environment with the cache of environments (DESIGN 8) in the pod's
// files directory, which lives as long as the pod.
func taskEnv(env map[string]string) map[string]string {
	if _, ok := env[envprep.CacheVar]; ok {
		return env
	}
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	out[envprep.CacheVar] = filesDir + "/envs"
	return out
}

// watchTask waits for a task's end in its pod (a loop in sh over one exec stream, see
// ssh.TaskStore.Wait) and reports it as TaskExited; it ends with the node, or unreported
// when the pod no longer has the task (no LostFunc).
func (d *Driver) watchTask(n *node, taskKey string) {
	tasks := d.taskStore(n.name)
	n.Tasks.Watch(taskKey,
		func(ctx context.Context) (bool, int, error) { return tasks.Wait(ctx, taskKey) },
		func(_ context.Context, code int) {
			d.emit(driver.Event{Kind: driver.TaskExited, NodeKey: n.Key, TaskKey: taskKey, ExitCode: code})
		}, nil)
}

// adoptTasks watches the running tasks of a node the driver adopted (after a restart).
// Callers do not hold d.mu: the list runs an exec in the pod.
func (d *Driver) adoptTasks(ctx context.Context, n *node) {
	tasks := d.taskStore(n.name)
	n.Tasks.Adopt(ctx, func(ctx context.Context) ([]string, error) { return tasks.RunningTasks(ctx, "") },
		func(k string) { d.watchTask(n, k) })
}

// TaskStatus reads the task's state from its files in the pod.
func (d *Driver) TaskStatus(ctx context.Context, nodeKey, taskKey string) (driver.TaskStatus, error) {
	n, err := d.liveNode(ctx, nodeKey)
	if err != nil {
		return driver.TaskStatus{}, fmt.Errorf("reading status of task %s: %w", taskKey, err)
	}
	running, code, err := d.taskStore(n.name).Status(ctx, taskKey)
	if err != nil {
		return driver.TaskStatus{}, d.taskErr(ctx, nodeKey, err)
	}
	return driver.TaskStatus{Running: running, ExitCode: code}, nil
}

// taskErr is err, or ErrNotFound when the node went meanwhile (an exec into a pod being
// deleted fails in other words).
func (d *Driver) taskErr(ctx context.Context, nodeKey string, err error) error {
	if driver.IsNotFound(err) {
		return err
	}
	if _, derr := d.livePod(ctx, nodeKey); driver.IsNotFound(derr) {
		return fmt.Errorf("%w (node %s is gone)", driver.NotFound(err), nodeKey)
	}
	return err
}

// TaskOutput reads the task's output file from offset on.
func (d *Driver) TaskOutput(ctx context.Context, nodeKey, taskKey string, offset int64) ([]byte, error) {
	n, err := d.liveNode(ctx, nodeKey)
	if err != nil {
		return nil, fmt.Errorf("reading output of task %s: %w", taskKey, err)
	}
	out, err := d.taskStore(n.name).Output(ctx, taskKey, offset)
	if err != nil {
		return nil, d.taskErr(ctx, nodeKey, err)
	}
	return out, nil
}

// FetchOutput streams rel of the ended task's working directory out of the pod: find and
// tar through the pods/exec API, PutDir in reverse (see ssh.TaskStore.Fetch).
func (d *Driver) FetchOutput(ctx context.Context, nodeKey, taskKey, rel string) (io.ReadCloser, error) {
	n, err := d.liveNode(ctx, nodeKey)
	if err != nil {
		return nil, fmt.Errorf("fetching output of task %s: %w", taskKey, err)
	}
	tasks := d.taskStore(n.name)
	return driver.StreamOutput(ctx, func(ctx context.Context, w io.Writer) error {
		if err := tasks.Fetch(ctx, taskKey, rel, w); err != nil {
			return d.taskErr(ctx, nodeKey, err)
		}
		return nil
	}), nil
}

// KillTask sends SIGTERM to the task's process group, SIGKILL after 10 s, and returns
// once its exit status is recorded.
func (d *Driver) KillTask(ctx context.Context, nodeKey, taskKey string) error {
	n, err := d.liveNode(ctx, nodeKey)
	if err != nil {
		return fmt.Errorf("killing task %s: %w", taskKey, err)
	}
	if err := d.taskStore(n.name).Kill(ctx, taskKey); err != nil {
		return d.taskErr(ctx, nodeKey, err)
	}
	return nil
}

// execScript runs an interactive command in its own session (so a kill reaches all of
// it), with the session id in the file $0, and exits with its status. The command keeps
// the exec's stdin (through fd 3: a shell without job control gives a background command
// /dev/null before its own redirections); its stderr goes to stdout.
const execScript = `f=$0
mkdir -p "${f%/*}" || exit 127
exec 3<&0
setsid "$@" <&3 3<&- 2>&1 &
p=$!
echo "$p" > "$f"
wait "$p"
code=$?
rm -f "$f"
exit "$code"`

// killExecScript ends the session of execScript's file $0: SIGTERM, then SIGKILL after 5 s.
const killExecScript = `p=$(cat "$0" 2>/dev/null) || exit 0
kill -TERM -"$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
i=0
while kill -0 -"$p" 2>/dev/null && [ "$i" -lt 50 ]; do i=$((i+1)); sleep 0.1 2>/dev/null || sleep 1; done
kill -KILL -"$p" 2>/dev/null
rm -f "$0"
exit 0`

// Exec runs an interactive command in the node's pod through pods/exec, with spec.Stdin
// as its input and its output (stdout and stderr) to spec.Output. When ctx ends first, its
// process group is killed.
func (d *Driver) Exec(ctx context.Context, nodeKey string, spec driver.ExecSpec) (int, error) {
	n, err := d.readyNode(ctx, nodeKey)
	if err != nil {
		return 0, fmt.Errorf("exec on node %s: %w", nodeKey, err)
	}
	if len(spec.Command) == 0 {
		return 0, driver.Permanent(fmt.Errorf("exec on node %s: no command", nodeKey))
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	pidFile := filesDir + "/exec/" + hex.EncodeToString(b) + ".pid"
	args := []string{"sh", "-c", execScript, pidFile, "env"}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, k+"="+spec.Env[k])
	}
	args = append(args, spec.Command...)
	stdin := spec.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	out := spec.Output
	if out == nil {
		out = io.Discard
	}
	code, err := d.exec(ctx, n.name, args, stdin, out, nil)
	if ctx.Err() != nil {
		kctx, cancel := context.WithTimeout(d.ctx, 15*time.Second)
		defer cancel()
		if _, kerr := d.exec(kctx, n.name, []string{"sh", "-c", killExecScript, pidFile}, nil, io.Discard, nil); kerr != nil {
			d.log.Warn("killing an exec session whose caller left", "node", nodeKey, "error", kerr)
		}
		return 0, fmt.Errorf("exec on node %s: %w", nodeKey, driver.Transient(ctx.Err()))
	}
	if err != nil {
		return 0, fmt.Errorf("exec on node %s: %w", nodeKey, d.taskErr(ctx, nodeKey, err))
	}
	return code, nil
}
