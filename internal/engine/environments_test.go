package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/endpointstest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

func (r *rig) environment(ws string, spec api.EnvironmentSpec) *api.Environment {
	r.t.Helper()
	env, err := r.e.CreateEnvironment(context.Background(), ws, spec, "")
	if err != nil {
		r.t.Fatal(err)
	}
	return env
}

func (r *rig) submitIn(ws, compute, environment string) *api.Job {
	r.t.Helper()
	j, err := r.e.SubmitJob(context.Background(), ws, api.JobSpec{Compute: compute, InstanceCount: 1, Command: []string{"python", "train.py"}, Environment: environment}, "")
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *rig) envTask(ws, jobID string, rank int) string {
	r.t.Helper()
	var key string
	_ = r.st.View(func(tx *store.Tx) error {
		j, _ := model.GetJob(tx, ws, jobID)
		key = j.EnvTaskKey(rank)
		return nil
	})
	return key
}

func (r *rig) jobLog(ws, jobID string) string {
	r.t.Helper()
	var all []byte
	var offset int64
	for range 10 {
		data, next, _, err := r.e.JobLogs(context.Background(), ws, jobID, 0, offset)
		if err != nil {
			r.t.Fatal(err)
		}
		if len(data) == 0 {
			break
		}
		all, offset = append(all, data...), next
	}
	return string(all)
}

// A job with a system-managed environment waits in Preparing (reason "building
// environment") while a build task runs on its node; its own task starts only once the
// build succeeded, with the environment first on PATH, and its log opens with the build's.
func TestJobWaitsForItsEnvironmentBuild(t *testing.T) {
	r := newRigWithDriver(t, 0, fake.Options{Start: func(_ string, spec driver.TaskSpec) fake.Outcome {
		if strings.HasPrefix(spec.Key, model.EnvTaskPrefix) {
			return fake.Outcome{Output: []byte("mlcompute: building environment\n")}
		}
		return fake.Outcome{Output: []byte("training\n")}
	}})
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 1, "PT120S")
	env := r.environment("lab", api.EnvironmentSpec{Name: "train", Python: &api.PythonEnvironment{Requirements: []string{"mlctest==0.1"}, FindLinks: []string{"/srv/wheels"}}})
	j := r.submitIn("lab", "cpu", "train")
	if j.Environment != "train" || j.EnvironmentHash != env.ContentHash {
		t.Fatalf("job environment %q %q; want train %s", j.Environment, j.EnvironmentHash, env.ContentHash)
	}
	r.settlesTo("job preparing", r.status("lab", j.ID, api.JobPreparing))
	got := r.job("lab", j.ID)
	if got.Reason != "building environment" {
		t.Fatalf("reason %q; want building environment", got.Reason)
	}
	node := got.Nodes[0]
	build, ok := r.drv.Task(node, r.envTask("lab", j.ID, 0))
	if !ok {
		t.Fatal("no build task on the job's node")
	}
	cmd := strings.Join(build.Spec.Command, " ")
	if build.Spec.Command[0] != "python3" || !strings.Contains(cmd, "--no-index --find-links /srv/wheels mlctest==0.1") {
		t.Fatalf("build command %q; want python3 running pip offline with the find_links", cmd)
	}
	if _, started := r.drv.Task(node, r.task("lab", j.ID, 0)); started {
		t.Fatal("the job's task started before its environment was built")
	}
	if logs := r.jobLog("lab", j.ID); !strings.Contains(logs, "building environment") {
		t.Fatalf("log while building: %q", logs)
	}

	r.drv.FinishTask(node, r.envTask("lab", j.ID, 0), 0)
	r.settlesTo("job running", r.status("lab", j.ID, api.JobRunning))
	task, ok := r.drv.Task(node, r.task("lab", j.ID, 0))
	if !ok || task.Spec.Command[0] != "/bin/sh" || task.Spec.Env["MLCOMPUTE_ENV_NAME"] != env.ContentHash[:16] ||
		strings.Join(task.Spec.Command[len(task.Spec.Command)-2:], " ") != "python train.py" {
		t.Fatalf("task %+v; want the command wrapped with the environment first on PATH", task.Spec)
	}
	if r.job("lab", j.ID).Reason != "" {
		t.Fatal("a running job has a wait reason")
	}
	r.drv.FinishTask(node, r.task("lab", j.ID, 0), 0)
	r.settlesTo("job completed", r.status("lab", j.ID, api.JobCompleted))
	if logs := r.jobLog("lab", j.ID); logs != "mlcompute: building environment\ntraining\n" {
		t.Fatalf("job log %q; want the build's output, then the task's", logs)
	}
}

// A failed build fails the job with the build's last lines, never starts its task, and
// frees its node.
func TestFailedBuildFailsTheJobWithPipsError(t *testing.T) {
	r := newRigWithDriver(t, 0, fake.Options{Start: func(_ string, spec driver.TaskSpec) fake.Outcome {
		if strings.HasPrefix(spec.Key, model.EnvTaskPrefix) {
			return fake.Outcome{Exited: true, ExitCode: 1, Output: []byte("Looking in links: /srv/wheels\nERROR: No matching distribution found for nope==9\nmlcompute: pip failed (exit status 1)\n")}
		}
		return fake.Outcome{}
	}})
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 1, "PT120S")
	r.environment("lab", api.EnvironmentSpec{Name: "bad", Python: &api.PythonEnvironment{Requirements: []string{"nope==9"}, FindLinks: []string{"/srv/wheels"}}})
	j := r.submitIn("lab", "cpu", "bad")
	r.settlesTo("job failed", r.status("lab", j.ID, api.JobFailed))
	got := r.job("lab", j.ID)
	if !strings.Contains(got.Error, `building environment "bad" failed`) || !strings.Contains(got.Error, "No matching distribution found for nope==9") {
		t.Fatalf("error %q; want the build failure with pip's message", got.Error)
	}
	if _, started := r.drv.Task(got.Nodes[0], r.task("lab", j.ID, 0)); started {
		t.Fatal("the job's task started after a failed build")
	}
	if logs := r.jobLog("lab", j.ID); !strings.Contains(logs, "No matching distribution") {
		t.Fatalf("job log %q; want the build's output", logs)
	}
	r.settlesTo("node idle again", func() bool { return countState(r.compute("lab", "cpu"), api.NodeIdle) == 1 })
}

// A user-managed environment is checked, not built, and its interpreter's directory goes
// first on PATH; a missing interpreter fails the job clearly.
func TestUserManagedEnvironmentIsCheckedNotBuilt(t *testing.T) {
	r := newRigWithDriver(t, 0, fake.Options{Start: func(_ string, spec driver.TaskSpec) fake.Outcome {
		if strings.HasPrefix(spec.Key, model.EnvTaskPrefix) {
			if spec.Command[len(spec.Command)-1] == "/missing/bin/python" {
				return fake.Outcome{Exited: true, ExitCode: 127, Output: []byte("mlcompute: interpreter /missing/bin/python is not an executable file on this node\n")}
			}
			return fake.Outcome{Exited: true}
		}
		return fake.Outcome{}
	}})
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 1, "PT120S")
	r.environment("lab", api.EnvironmentSpec{Name: "mine", UserManaged: &api.UserManagedEnvironment{InterpreterPath: "/opt/py/bin/python"}})
	r.environment("lab", api.EnvironmentSpec{Name: "gone", UserManaged: &api.UserManagedEnvironment{InterpreterPath: "/missing/bin/python"}})
	j := r.submitIn("lab", "cpu", "mine")
	r.settlesTo("job running", r.status("lab", j.ID, api.JobRunning))
	got := r.job("lab", j.ID)
	check, _ := r.drv.Task(got.Nodes[0], r.envTask("lab", j.ID, 0))
	if strings.Contains(strings.Join(check.Spec.Command, " "), "pip") {
		t.Fatalf("a user-managed environment was built: %q", check.Spec.Command)
	}
	task, _ := r.drv.Task(got.Nodes[0], r.task("lab", j.ID, 0))
	if task.Spec.Env["MLCOMPUTE_ENV_BIN"] != "/opt/py/bin" {
		t.Fatalf("task env %v; want /opt/py/bin first on PATH", task.Spec.Env)
	}
	r.drv.FinishTask(got.Nodes[0], r.task("lab", j.ID, 0), 0)
	r.settlesTo("job completed", r.status("lab", j.ID, api.JobCompleted))

	j2 := r.submitIn("lab", "cpu", "gone")
	r.settlesTo("job with a missing interpreter failed", r.status("lab", j2.ID, api.JobFailed))
	if e := r.job("lab", j2.ID).Error; !strings.Contains(e, "checking the interpreter /missing/bin/python") || !strings.Contains(e, "not an executable file") {
		t.Fatalf("error %q", e)
	}
}

// A change of an environment is a new content hash for later jobs; a job already submitted
// keeps the definition and hash it was submitted with.
func TestEnvironmentUpdateIsANewHashAndJobsKeepTheirs(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 1, "PT120S")
	v1 := r.environment("lab", api.EnvironmentSpec{Name: "train", Python: &api.PythonEnvironment{Requirements: []string{"a==1"}}})
	j1 := r.submitIn("lab", "cpu", "train")
	r.settlesTo("job 1 building", r.status("lab", j1.ID, api.JobPreparing))

	v2, err := r.e.UpdateEnvironment(context.Background(), "lab", "train", api.EnvironmentUpdate{Python: &api.PythonEnvironment{Requirements: []string{"a==2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if v2.ContentHash == v1.ContentHash || v2.CreatedOn != v1.CreatedOn || v2.Python.Python != "python3" {
		t.Fatalf("update: %+v; want a new hash, the same created_on and the default interpreter", v2)
	}
	if got := r.job("lab", j1.ID).EnvironmentHash; got != v1.ContentHash {
		t.Fatalf("job 1 hash %s after the update; want its own %s", got, v1.ContentHash)
	}
	got := r.job("lab", j1.ID)
	build, _ := r.drv.Task(got.Nodes[0], r.envTask("lab", j1.ID, 0))
	if !strings.Contains(strings.Join(build.Spec.Command, " "), "a==1") {
		t.Fatalf("job 1 builds %q; want its own a==1", build.Spec.Command)
	}
	j2 := r.submitIn("lab", "cpu", "train")
	if j2.EnvironmentHash != v2.ContentHash {
		t.Fatalf("job 2 hash %s; want the new %s", j2.EnvironmentHash, v2.ContentHash)
	}

	if _, err := r.e.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "cpu", Command: []string{"x"}, Environment: "nope"}, ""); !api.IsNotFound(err) || api.FieldOf(err) != "environment" {
		t.Fatalf("unknown environment: %v; want not_found on environment", err)
	}
	if _, err := r.e.CreateEnvironment(context.Background(), "lab", api.EnvironmentSpec{Name: "train", Python: &api.PythonEnvironment{}}, ""); api.CodeOf(err) != api.CodeConflict {
		t.Fatalf("second create of a name: %v; want conflict", err)
	}
	if err := r.e.DeleteEnvironment(context.Background(), "lab", "train"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.e.GetEnvironment(context.Background(), "lab", "train"); !api.IsNotFound(err) {
		t.Fatalf("deleted environment: %v", err)
	}
}

// An engine that restarts while a build runs adopts it: the build's end starts the job.
func TestRestartDuringBuildStartsTheJobWhenTheBuildEnds(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 1, "PT120S")
	r.environment("lab", api.EnvironmentSpec{Name: "train", Python: &api.PythonEnvironment{Requirements: []string{"a==1"}}})
	j := r.submitIn("lab", "cpu", "train")
	r.settlesTo("job building", r.status("lab", j.ID, api.JobPreparing))
	node := r.job("lab", j.ID).Nodes[0]
	key := r.envTask("lab", j.ID, 0)

	r.stop()
	r.drv.FinishTask(node, key, 0) // the build ends while the engine is down
	r.start()
	r.settlesTo("job running after the restart", r.status("lab", j.ID, api.JobRunning))
	if starts := countCalls(r.drv.CallsTo(fake.MethodStartTask), node+"/"+key); starts != 1 {
		t.Fatalf("build task started %d times; want once", starts)
	}
}

func countCalls(keys []string, key string) int {
	n := 0
	for _, k := range keys {
		if k == key {
			n++
		}
	}
	return n
}

// A job or a deployment in a container environment is taken only where a container runtime
// is: on a local-node engine without one it is refused at submit, saying how to get one, and
// an environment that runs a deployment cannot become a container one; a Python environment
// on top of an image is refused everywhere for now.
// The environment itself is stored like any other.
func TestContainerEnvironmentsAreRefusedWhereNothingRunsThem(t *testing.T) {
	r := newRig(t)
	r.workspace("wsp", nil)
	r.cluster("wsp", "cpu", 0, 1, "PT120S")
	img := r.environment("wsp", api.EnvironmentSpec{Name: "img", Container: &api.ContainerEnvironment{Image: "registry.example.com/train:1"}})
	onTop := r.environment("wsp", api.EnvironmentSpec{Name: "on-top", Container: &api.ContainerEnvironment{Image: "registry.example.com/train:1",
		Python: &api.PythonEnvironment{Requirements: []string{"mlctest==1.0"}}}})
	if onTop.Container == nil || onTop.Container.Python.Python != "python3" || onTop.ContentHash == "" || onTop.ContentHash == img.ContentHash {
		t.Fatalf("stored container environment: %+v", onTop)
	}
	for env, want := range map[string]string{
		"img":    `environment "img" is a container environment, and this engine's local nodes have no container runtime: start ` + "`mlcompute serve` with --containerd-address",
		"on-top": `environment "on-top" is a container environment, and this engine's local nodes have no container runtime`,
	} {
		_, err := r.e.SubmitJob(context.Background(), "wsp", api.JobSpec{Compute: "cpu", InstanceCount: 1, Command: []string{"true"}, Environment: env}, "")
		if api.CodeOf(err) != api.CodeInvalid || api.FieldOf(err) != "environment" || !strings.Contains(err.Error(), want) {
			t.Fatalf("job in container environment %s: %v; want invalid on environment saying %q", env, err, want)
		}
	}
	d := endpointstest.Deployment(1, "serve")
	d.EnvironmentID = img.ID
	_, err := r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": d}, Traffic: map[string]int64{"blue": 100}}, "")
	if api.CodeOf(err) != api.CodeInvalid || api.FieldOf(err) != "deployments.blue.environment_id" || !strings.Contains(err.Error(), "have no container runtime") {
		t.Fatalf("deployment in a container environment: %v; want invalid on deployments.blue.environment_id", err)
	}

	p := newProbes(r)
	py := r.environment("wsp", api.EnvironmentSpec{Name: "py", Python: &api.PythonEnvironment{}})
	d.EnvironmentID = py.ID
	readyEndpoint(t, r, p, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": d}, Traffic: map[string]int64{"blue": 100}})
	_, err = r.e.UpdateEnvironment(context.Background(), "wsp", "py", api.EnvironmentUpdate{Container: &api.ContainerEnvironment{Image: "train:1"}})
	if api.CodeOf(err) != api.CodeInvalid || api.FieldOf(err) != "container" || !strings.Contains(err.Error(), `deployment "blue" of endpoint "scorer"`) {
		t.Fatalf("update of a deployed environment to a container: %v; want invalid on container naming the deployment", err)
	}
	if got, _ := r.e.GetEnvironment(context.Background(), "wsp", "py"); got.ContentHash != py.ContentHash {
		t.Fatal("the refused update changed the environment")
	}
}

// On an engine whose local nodes run containers, a job in a container environment starts
// at once (the node imports or pulls the image itself: nothing is prepared before) with its
// image on the task: the reference, or the uploaded archive in the engine's snapshot store.
// An archive the engine holds no upload of is refused when the environment is created.
func TestContainerJobsCarryTheirImageToTheNode(t *testing.T) {
	snaps := snapshot.NewStore(t.TempDir())
	r := newRigConfigured(t, func(cfg *Config, _ *Engine) {
		cfg.ContainerdAddress, cfg.Snapshots = filepath.Join(t.TempDir(), "containerd.sock"), snaps
	})
	r.workspace("wsp", nil)
	r.cluster("wsp", "cpu", 0, 1, "PT120S")
	hex64 := strings.Repeat("ab", 32)
	archive := api.ContainerEnvironment{ImageArchive: "images/train.tar", ImageDigest: "sha256:" + hex64, ImageSnapshot: hex64}
	_, err := r.e.CreateEnvironment(context.Background(), "wsp", api.EnvironmentSpec{Name: "tar", Container: &archive}, "")
	if api.CodeOf(err) != api.CodeInvalid || api.FieldOf(err) != "container.image_archive" || !strings.Contains(err.Error(), "this engine holds no upload of it") {
		t.Fatalf("an archive that was not uploaded: %v; want invalid on container.image_archive", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, api.ImageArchiveFile), []byte("an image archive"), 0o600); err != nil {
		t.Fatal(err)
	}
	var packed bytes.Buffer
	if _, err := snapshot.Pack(dir, &packed, snapshot.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	if archive.ImageSnapshot, err = snaps.Put(&packed); err != nil {
		t.Fatal(err)
	}
	tar := r.environment("wsp", api.EnvironmentSpec{Name: "tar", Container: &archive})
	img := r.environment("wsp", api.EnvironmentSpec{Name: "img", Container: &api.ContainerEnvironment{Image: "registry.example.com/train:1"}})
	stored, _ := snaps.Path(archive.ImageSnapshot)
	for _, tc := range []struct {
		env  *api.Environment
		want driver.TaskContainer
	}{
		{tar, driver.TaskContainer{Archive: filepath.Join(stored, api.ImageArchiveFile), Hash: tar.ContentHash}},
		{img, driver.TaskContainer{Image: "registry.example.com/train:1", Hash: img.ContentHash}},
	} {
		j := r.submitIn("wsp", "cpu", tc.env.Name)
		r.settlesTo("job running", r.status("wsp", j.ID, api.JobRunning))
		node, key := r.job("wsp", j.ID).Nodes[0], strings.TrimPrefix(r.envTask("wsp", j.ID, 0), model.EnvTaskPrefix)
		task, ok := r.drv.Task(node, key)
		if !ok || task.Spec.Container == nil || !reflect.DeepEqual(*task.Spec.Container, tc.want) {
			t.Fatalf("%s: the task's container is %+v; want %+v", tc.env.Name, task.Spec.Container, tc.want)
		}
		if _, ok := r.drv.Task(node, r.envTask("wsp", j.ID, 0)); ok {
			t.Fatalf("%s: an environment task ran before the job's", tc.env.Name)
		}
		r.drv.FinishTask(node, key, 0)
		r.settlesTo("job completed", r.status("wsp", j.ID, api.JobCompleted))
	}

	// A Python environment on top of an image is built in a container of the image, with
	// the node's cache and the find_links directories mounted, before the job's task runs
	// in the image with the build first on PATH.
	onTop := r.environment("wsp", api.EnvironmentSpec{Name: "on-top", Container: &api.ContainerEnvironment{Image: "registry.example.com/train:1",
		Python: &api.PythonEnvironment{Requirements: []string{"mlctest==0.1"}, FindLinks: []string{"/srv/wheels", "file:///srv/more", "https://example.com/wheels"}}}})
	want := driver.TaskContainer{Image: "registry.example.com/train:1", Hash: onTop.ContentHash, EnvCache: true, Mounts: []string{"/srv/wheels", "/srv/more"}}
	j := r.submitIn("wsp", "cpu", "on-top")
	r.settlesTo("environment building", func() bool { return r.job("wsp", j.ID).Reason == "building environment" })
	node := r.job("wsp", j.ID).Nodes[0]
	build, ok := r.drv.Task(node, r.envTask("wsp", j.ID, 0))
	if !ok || build.Spec.Container == nil || !reflect.DeepEqual(*build.Spec.Container, want) || build.Spec.Command[0] != "python3" {
		t.Fatalf("the build on top of the image: %+v in %+v; want python3 in %+v", build.Spec.Command, build.Spec.Container, want)
	}
	r.drv.FinishTask(node, r.envTask("wsp", j.ID, 0), 0)
	r.settlesTo("job running", r.status("wsp", j.ID, api.JobRunning))
	key := strings.TrimPrefix(r.envTask("wsp", j.ID, 0), model.EnvTaskPrefix)
	task, ok := r.drv.Task(node, key)
	if !ok || task.Spec.Container == nil || !reflect.DeepEqual(*task.Spec.Container, want) || task.Spec.Env["MLCOMPUTE_ENV_NAME"] == "" {
		t.Fatalf("the job's task: %+v in %+v; want the build first on PATH in %+v", task.Spec.Env, task.Spec.Container, want)
	}
	r.drv.FinishTask(node, key, 0)
	r.settlesTo("job completed", r.status("wsp", j.ID, api.JobCompleted))

	// An endpoint deployment's instance runs in the image too; an environment that runs a
	// deployment may become a container one here.
	d := endpointstest.Deployment(1, "serve")
	d.EnvironmentID = img.ID
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": d}, Traffic: map[string]int64{"blue": 100}}, ""); err != nil {
		t.Fatal(err)
	}
	in := r.started("wsp", "scorer", "blue", 1, 1)[0]
	task, ok = r.drv.Task(in.ID, in.Task)
	if want := (driver.TaskContainer{Image: "registry.example.com/train:1", Hash: img.ContentHash}); !ok || task.Spec.Container == nil || !reflect.DeepEqual(*task.Spec.Container, want) {
		t.Fatalf("the instance's container is %+v; want %+v", task.Spec.Container, want)
	}
	if _, err := r.e.UpdateEnvironment(context.Background(), "wsp", "img", api.EnvironmentUpdate{Container: &api.ContainerEnvironment{Image: "registry.example.com/train:2"}}); err != nil {
		t.Fatalf("a new image for a deployed environment: %v", err)
	}
}

// On an engine whose nodes are Kubernetes pods, a job in a container environment is taken
// and its task carries the image (the driver runs it in a container of the node's pod); a
// compute of a GPU size, and a deployment of a GPU instance type, refuse it at submit,
// naming the size: the GPUs would not reach the image's container.
func TestContainerJobsOnPodNodes(t *testing.T) {
	r := newRigConfigured(t, func(cfg *Config, _ *Engine) { cfg.NodesDriver = "kubernetes" })
	r.workspace("wsp", map[string]int64{"standardNCSv3Family": 6})
	r.cluster("wsp", "cpu", 0, 1, "PT120S")
	img := r.environment("wsp", api.EnvironmentSpec{Name: "img", Container: &api.ContainerEnvironment{Image: "registry.example.com/train:1"}})
	j := r.submitIn("wsp", "cpu", "img")
	r.settlesTo("job running", r.status("wsp", j.ID, api.JobRunning))
	node, key := r.job("wsp", j.ID).Nodes[0], strings.TrimPrefix(r.envTask("wsp", j.ID, 0), model.EnvTaskPrefix)
	want := driver.TaskContainer{Image: "registry.example.com/train:1", Hash: img.ContentHash}
	if task, ok := r.drv.Task(node, key); !ok || task.Spec.Container == nil || !reflect.DeepEqual(*task.Spec.Container, want) {
		t.Fatalf("the task's container is %+v; want %+v", task.Spec.Container, want)
	}
	r.drv.FinishTask(node, key, 0)
	r.settlesTo("job completed", r.status("wsp", j.ID, api.JobCompleted))

	_, err := r.e.CreateCompute(context.Background(), "wsp", api.ComputeSpec{
		Name: "gpu", VMSize: "Standard_NC6s_v3", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1, ScaleDownNodesAfterIdleDuration: "PT120S"},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.e.SubmitJob(context.Background(), "wsp", api.JobSpec{Compute: "gpu", InstanceCount: 1, Command: []string{"true"}, Environment: "img"}, "")
	if api.CodeOf(err) != api.CodeInvalid || api.FieldOf(err) != "environment" || !strings.Contains(err.Error(), `compute "gpu" is of size Standard_NC6s_v3, whose GPUs (1)`) {
		t.Fatalf("a job in an image on a GPU size's pods: %v; want invalid on environment naming the size", err)
	}
	d := endpointstest.Deployment(1, "serve")
	d.EnvironmentID, d.InstanceType = img.ID, "Standard_NC6s_v3"
	_, err = r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": d}, Traffic: map[string]int64{"blue": 100}}, "")
	if api.CodeOf(err) != api.CodeInvalid || api.FieldOf(err) != "deployments.blue.environment_id" || !strings.Contains(err.Error(), "the deployment's instance type is of size Standard_NC6s_v3") {
		t.Fatalf("a deployment in an image of a GPU instance type on pods: %v; want invalid on deployments.blue.environment_id naming the size", err)
	}
}
