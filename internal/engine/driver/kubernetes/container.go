package kubernetes

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
)

// A task that comes with an image (driver.TaskSpec.Container) on the engine's own pods
// (`mlcompute serve --nodes kubernetes`). A node's pod lives long and runs the jobs of many
// environments, so such a task runs in an ephemeral container added to the node's pod:
//   - of the task's image (an image_archive's image is imported into the containerd of the
//     pod's Kubernetes node first, as for attached clusters, and never pulled);
//   - in the process namespace of the node's container (targetContainerName), with the
//     pod's /mlcompute emptyDir mounted at the same path, as the node container's user;
//   - running the task's wrapper, whose files ssh.TaskStore wrote as for any task
//     (RemoteTask.LaunchedElsewhere).
// Everything after the start (status, output, outputs, kill, adoption after a restart) goes
// through the node's container as for any task: both see the same files and processes.
// The task runs in the pod's cgroup, so within the node's CPU and memory limits; the pod's
// network is its network (MASTER_ADDR and an instance's PORT are the pod's).
//
// A container that cannot start (an image that cannot be pulled, or with no /bin/sh) ends
// its task with exit status 127 and the kubelet's reason in the task's output
// (watchTaskContainers). An ephemeral container cannot be removed: it stays in the pod's
// spec, ended, until the node's pod goes.

// taskKeyVar names, in a task container's environment, the task it runs.
const taskKeyVar = "MLCOMPUTE_TASK_KEY"

// tasksDir holds the tasks' files in a node's pod.
const tasksDir = filesDir + "/tasks"

// taskContainerName is the ephemeral container of a task: a DNS label unique in its pod.
func taskContainerName(taskKey string) string { return dnsLabel("task-" + taskKey) }

// startInImage writes task's files (through tasks, node n's) and starts its wrapper in a
// container of the task's image in n's pod.
func (d *Driver) startInImage(ctx context.Context, n *node, tasks ssh.TaskStore, spec driver.TaskSpec, task ssh.RemoteTask) error {
	c := spec.Container
	image, pull := c.Image, corev1.PullIfNotPresent
	if c.Archive != "" {
		host, err := d.podHost(ctx, n)
		if err != nil {
			return err
		}
		if err := d.importOnce(ctx, host, ImageArchive{Path: c.Archive, Hash: c.Hash, ImportImage: d.cfg.Image}); err != nil {
			return err
		}
		image, pull = environment.ArchiveImage(c.Hash), corev1.PullNever
	}
	user, err := d.containerUser(ctx, n)
	if err != nil {
		return err
	}
	task.LaunchedElsewhere = true
	if err := tasks.Start(ctx, task); err != nil {
		return err
	}
	ec := taskContainer(spec.Key, image, pull, user)
	if err := d.addEphemeral(ctx, n.name, ec); err != nil {
		// The task's files say it is running: end it, so nothing waits for it.
		if ferr := tasks.FailUnlaunched(ctx, spec.Key, err.Error()); ferr != nil {
			d.log.Warn("ending a task whose container was refused", "node", n.Key, "task", spec.Key, "error", ferr)
		}
		return err
	}
	return nil
}

// taskContainer is the ephemeral container that runs a task's wrapper.
func taskContainer(key, image string, pull corev1.PullPolicy, user podUser) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:            taskContainerName(key),
			Image:           image,
			ImagePullPolicy: pull,
			Command:         ssh.WrapperCommand(tasksDir, key),
			WorkingDir:      filesDir,
			Env:             []corev1.EnvVar{{Name: taskKeyVar, Value: key}},
			VolumeMounts:    []corev1.VolumeMount{{Name: "mlcompute", MountPath: filesDir}},
			SecurityContext: &corev1.SecurityContext{RunAsUser: &user.uid, RunAsGroup: &user.gid},
		},
		TargetContainerName: containerName,
	}
}

// addEphemeral adds container ec to a pod unless the pod has it (a start repeated after a
// restart).
func (d *Driver) addEphemeral(ctx context.Context, podName string, ec corev1.EphemeralContainer) error {
	pods := d.cs.CoreV1().Pods(d.cfg.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, podName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, have := range pod.Spec.EphemeralContainers {
			if have.Name == ec.Name {
				return nil
			}
		}
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, ec)
		_, err = pods.UpdateEphemeralContainers(ctx, podName, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("adding the container of image %s to pod %s (the engine needs update on pods/ephemeralcontainers to run tasks in images): %w",
			ec.Image, podName, classify(err))
	}
	return nil
}

// podUser is the user and group a node's container runs as.
type podUser struct{ uid, gid int64 }

// containerUser is the user the node's container runs as (asked once per node), which a
// task's container runs as too: the task's files are that user's, and only the same user
// (or root) may signal the task's processes from the node's container.
func (d *Driver) containerUser(ctx context.Context, n *node) (podUser, error) {
	d.mu.Lock()
	u := n.user
	d.mu.Unlock()
	if u != nil {
		return *u, nil
	}
	var out strings.Builder
	code, err := d.exec(ctx, n.name, []string{"sh", "-c", "id -u; id -g"}, nil, &out, nil)
	if err == nil && code != 0 {
		err = fmt.Errorf("id exited %d", code)
	}
	if err != nil {
		return podUser{}, fmt.Errorf("asking node %s's container for its user: %w", n.Key, err)
	}
	f := strings.Fields(out.String())
	if len(f) != 2 {
		return podUser{}, fmt.Errorf("asking node %s's container for its user: unexpected answer %q", n.Key, out.String())
	}
	uid, err1 := strconv.ParseInt(f[0], 10, 64)
	gid, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return podUser{}, fmt.Errorf("asking node %s's container for its user: unexpected answer %q", n.Key, out.String())
	}
	d.mu.Lock()
	n.user = &podUser{uid: uid, gid: gid}
	d.mu.Unlock()
	return podUser{uid: uid, gid: gid}, nil
}

// podHost is the Kubernetes node a ready node's pod runs on.
func (d *Driver) podHost(ctx context.Context, n *node) (string, error) {
	if pod, err := d.pods.Get(n.name); err == nil && pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, nil
	}
	pod, err := d.cs.CoreV1().Pods(d.cfg.Namespace).Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading pod %s: %w", n.name, classify(err))
	}
	if pod.Spec.NodeName == "" {
		return "", driver.Transient(fmt.Errorf("pod %s is not placed on a node yet", n.name))
	}
	return pod.Spec.NodeName, nil
}

// watchTaskContainers ends the tasks whose containers in pod cannot start: waiting on an
// image that cannot be pulled, or ended before their wrapper ran (an image with no
// /bin/sh). Each container is looked at once it has settled. Callers hold d.mu.
func (d *Driver) watchTaskContainers(n *node, pod *corev1.Pod) {
	for _, st := range pod.Status.EphemeralContainerStatuses {
		if n.settled[st.Name] {
			continue
		}
		var why string
		switch {
		case st.State.Waiting != nil && fatalWaiting[st.State.Waiting.Reason]:
			why = joinReason(st.State.Waiting.Reason, st.State.Waiting.Message)
		case st.State.Terminated != nil && st.State.Terminated.ExitCode != 0:
			// A wrapper that ran exits 0 whatever its task did.
			why = terminatedReason(st.State.Terminated)
		default:
			continue
		}
		key := ephemeralTaskKey(pod, st.Name)
		if key == "" {
			continue
		}
		if n.settled == nil {
			n.settled = map[string]bool{}
		}
		n.settled[st.Name] = true
		msg := fmt.Sprintf("the task's container (image %s) could not start: %s", st.Image, why)
		tasks, ctx := d.taskStore(n.name), n.Context()
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := tasks.FailUnlaunched(ctx, key, msg); err != nil && ctx.Err() == nil {
				d.log.Warn("ending a task whose container could not start", "node", n.Key, "task", key, "error", err)
			}
		}()
	}
}

// ephemeralTaskKey is the task an ephemeral container of pod runs, or "".
func ephemeralTaskKey(pod *corev1.Pod, name string) string {
	for _, ec := range pod.Spec.EphemeralContainers {
		if ec.Name != name {
			continue
		}
		for _, e := range ec.Env {
			if e.Name == taskKeyVar {
				return e.Value
			}
		}
	}
	return ""
}
