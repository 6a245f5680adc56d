package jobs_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes/computestest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/clusters"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/jobs"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// setupFiles is setup with tasks that have real working directories (the fake driver's
// Dir) and an artifacts store.
func setupFiles(t *testing.T) (*computestest.Env, *jobs.Controller, *artifacts.Store) {
	t.Helper()
	return setupFilesWith(t, jobs.Config{})
}

// setupFilesWith is setupFiles with the controller built from cfg (its artifacts store
// and output bound are setupFiles').
func setupFilesWith(t *testing.T, cfg jobs.Config) (*computestest.Env, *jobs.Controller, *artifacts.Store) {
	t.Helper()
	st, err := artifacts.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := computestest.New(t, computestest.Options{Fake: fake.Options{Dir: t.TempDir()}, Artifacts: st})
	cl := clusters.New(env.Core)
	env.Core.RegisterPass(api.TypeComputeCluster, cl.Pass)
	cfg.Artifacts, cfg.MaxOutputSize = st, 1<<20
	c := jobs.New(env.Core, cfg)
	env.Core.RegisterTaskOwner(c)
	env.Workspace("lab", map[string]int64{"standardDSv2Family": 12})
	if _, err := cl.Create(context.Background(), "lab", api.ComputeSpec{Name: "cpu", VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: 2, ScaleDownNodesAfterIdleDuration: "PT5M"}}, ""); err != nil {
		t.Fatal(err)
	}
	return env, c, st
}

// writeFiles writes files (name -> content) below dir, as a job's command would.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tarFiles reads a tar stream's regular files.
func tarFiles(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[hdr.Name] = string(b)
		}
	}
}

var modelFiles = map[string]string{"weights.bin": "0123456789", "config/params.json": `{"lr":0.1}`, "config/copy.json": `{"lr":0.1}`}

func runWithOutput(t *testing.T, env *computestest.Env, c *jobs.Controller, name string, count int64) (*api.Job, []string) {
	t.Helper()
	j := submit(t, c, api.JobSpec{Name: name, Compute: "cpu", InstanceCount: count, Command: []string{"sh", "-c", "train ${{outputs.model}}"},
		Outputs: map[string]api.JobOutput{"model": {}}}, "")
	env.Settle()
	rec := env.Job("lab", j.ID)
	if rec.Status != api.JobRunning {
		t.Fatalf("job %s is %s; want running", j.ID, rec.Status)
	}
	return j, rec.Nodes
}

// completeWithModel runs a one-node job that writes modelFiles as its output "model" and
// exits 0, and returns it with the output's registered digest.
func completeWithModel(t *testing.T, env *computestest.Env, c *jobs.Controller, name string) (*api.Job, string) {
	t.Helper()
	j, nodes := runWithOutput(t, env, c, name, 1)
	task := env.Job("lab", j.ID).TaskKey(0)
	writeFiles(t, filepath.Join(env.Driver.WorkDir(nodes[0], task), "outputs", "model"), modelFiles)
	env.Driver.FinishTask(nodes[0], task, 0)
	env.Settle()
	digest := env.Job("lab", j.ID).Outputs["model"].Digest
	if digest == "" {
		t.Fatalf("job %s registered no output", j.ID)
	}
	return j, digest
}

func TestAJobThatExits0RegistersItsOutputInTheWriteThatCompletesIt(t *testing.T) {
	env, c, st := setupFiles(t)
	j, nodes := runWithOutput(t, env, c, "train", 1)
	task := env.Job("lab", j.ID).TaskKey(0)
	work := env.Driver.WorkDir(nodes[0], task)
	if fi, err := os.Stat(filepath.Join(work, "outputs", "model")); err != nil || !fi.IsDir() {
		t.Fatalf("the output's directory was not made empty on the node: %v", err)
	}
	writeFiles(t, filepath.Join(work, "outputs", "model"), modelFiles)
	env.Driver.FinishTask(nodes[0], task, 0)
	env.Settle()
	done := env.Job("lab", j.ID)
	out := done.Outputs["model"]
	if done.Status != api.JobCompleted || !strings.HasPrefix(out.Digest, "sha256:") || out.FileCount != 3 || out.Size != 30 {
		t.Fatalf("job %s, output %+v; want Completed with 3 files of 30 bytes registered", done.Status, out)
	}
	if got, _ := st.Usage(); got == 0 {
		t.Fatal("the store holds nothing after the intake")
	}
	reg, err := c.JobOutput(context.Background(), "lab", j.ID, "model")
	if err != nil || reg.Digest != out.Digest {
		t.Fatalf("JobOutput = %+v, %v", reg, err)
	}
	var buf bytes.Buffer
	if err := c.WriteOutput(context.Background(), &buf, reg.Digest); err != nil {
		t.Fatal(err)
	}
	if got := tarFiles(t, &buf); fmt.Sprint(got) != fmt.Sprint(modelFiles) {
		t.Fatalf("downloaded %v; want %v", got, modelFiles)
	}
	// Nothing is collected while the job references it; its delete lets it go.
	if n, _, err := c.CollectArtifacts(); err != nil || n != 0 {
		t.Fatalf("collection removed %d blobs (%v) of a registered output", n, err)
	}
	if err := c.DeleteJob(context.Background(), "lab", j.ID); err != nil {
		t.Fatal(err)
	}
	if got, blobs := st.Usage(); got != 0 || blobs != 0 {
		t.Fatalf("after delete the store holds %d bytes in %d blobs; want none", got, blobs)
	}
	_, err = c.GetJob(context.Background(), "lab", j.ID)
	_ = computestest.WantError(t, err, api.CodeNotFound, "")
}

func TestAJobThatFailsRegistersNothingAndLeavesNothingAfterCollection(t *testing.T) {
	env, c, st := setupFiles(t)
	j, nodes := runWithOutput(t, env, c, "half", 1)
	task := env.Job("lab", j.ID).TaskKey(0)
	writeFiles(t, filepath.Join(env.Driver.WorkDir(nodes[0], task), "outputs", "model"), map[string]string{"part-1": "half"})
	_, err := c.JobOutput(context.Background(), "lab", j.ID, "model")
	_ = computestest.WantError(t, err, api.CodeConflict, "path")
	err = c.DeleteJob(context.Background(), "lab", j.ID)
	_ = computestest.WantError(t, err, api.CodeConflict, "")
	env.Driver.FinishTask(nodes[0], task, 1)
	env.Settle()
	done := env.Job("lab", j.ID)
	if done.Status != api.JobFailed || done.Outputs["model"].Digest != "" {
		t.Fatalf("job %s, output %+v; want Failed with nothing registered", done.Status, done.Outputs["model"])
	}
	if _, _, err := c.CollectArtifacts(); err != nil {
		t.Fatal(err)
	}
	if got, blobs := st.Usage(); got != 0 || blobs != 0 {
		t.Fatalf("the store holds %d bytes in %d blobs; want none", got, blobs)
	}
}

func TestARefusedOutputFailsTheJobNamingTheOutputAndFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, dir string)
		want  string
	}{
		{"symlink out", func(t *testing.T, dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "leak")); err != nil {
				t.Fatal(err)
			}
		}, `output "model": file "leak"`},
		{"too large", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"big": strings.Repeat("x", 1<<20+1)})
		}, `output "model": output is larger than the limit of 1048576 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, c, st := setupFiles(t)
			j, nodes := runWithOutput(t, env, c, "bad", 1)
			task := env.Job("lab", j.ID).TaskKey(0)
			tc.write(t, filepath.Join(env.Driver.WorkDir(nodes[0], task), "outputs", "model"))
			env.Driver.FinishTask(nodes[0], task, 0)
			env.Settle()
			done := env.Job("lab", j.ID)
			if done.Status != api.JobFailed || !strings.Contains(done.Error, tc.want) || done.Outputs["model"].Digest != "" {
				t.Fatalf("job %s (%q); want Failed naming %q, nothing registered", done.Status, done.Error, tc.want)
			}
			if _, _, err := c.CollectArtifacts(); err != nil {
				t.Fatal(err)
			}
			if got, _ := st.Usage(); got != 0 {
				t.Fatalf("the store holds %d bytes after a refused output", got)
			}
		})
	}
}

func TestRank0sOutputWaitsForTheOtherRanks(t *testing.T) {
	for _, last := range []int{0, 7} {
		t.Run(fmt.Sprintf("rank 1 exits %d", last), func(t *testing.T) {
			env, c, st := setupFiles(t)
			j, nodes := runWithOutput(t, env, c, "dist", 2)
			rec := env.Job("lab", j.ID)
			writeFiles(t, filepath.Join(env.Driver.WorkDir(nodes[0], rec.TaskKey(0)), "outputs", "model"), modelFiles)
			env.Driver.FinishTask(nodes[0], rec.TaskKey(0), 0)
			env.Settle()
			mid := env.Job("lab", j.ID)
			if mid.Status != api.JobRunning || mid.Outputs["model"].Digest != "" || mid.PendingOutputs["model"].Digest == "" {
				t.Fatalf("after rank 0: %s, outputs %+v, pending %+v; want running with the output pending, not registered", mid.Status, mid.Outputs, mid.PendingOutputs)
			}
			if n, _, _ := c.CollectArtifacts(); n != 0 {
				t.Fatalf("collection removed %d blobs of a pending output", n)
			}
			env.Driver.FinishTask(nodes[1], rec.TaskKey(1), last)
			env.Settle()
			done := env.Job("lab", j.ID)
			if _, _, err := c.CollectArtifacts(); err != nil {
				t.Fatal(err)
			}
			bytes, _ := st.Usage()
			if last == 0 && (done.Status != api.JobCompleted || done.Outputs["model"].Digest != mid.PendingOutputs["model"].Digest || bytes == 0) {
				t.Fatalf("job %s, outputs %+v, store %d bytes; want Completed with rank 0's output", done.Status, done.Outputs, bytes)
			}
			if last != 0 && (done.Status != api.JobFailed || done.Outputs["model"].Digest != "" || len(done.PendingOutputs) != 0 || bytes != 0) {
				t.Fatalf("job %s, outputs %+v, pending %v, store %d bytes; want Failed with nothing", done.Status, done.Outputs, done.PendingOutputs, bytes)
			}
		})
	}
}

func TestAnOutputIsTheNextJobsInput(t *testing.T) {
	env, c, st := setupFiles(t)
	first, _ := completeWithModel(t, env, c, "first")
	second := submit(t, c, api.JobSpec{Compute: "cpu", Command: []string{"sh", "-c", "cat ${{inputs.m}}/weights.bin"},
		Inputs: map[string]api.JobInput{"m": {Path: "azureml://jobs/first/outputs/model"}}}, "")
	env.Settle()
	rec := env.Job("lab", second.ID)
	got, err := os.ReadFile(filepath.Join(env.Driver.WorkDir(rec.Nodes[0], rec.TaskKey(0)), "inputs", "m", "config", "params.json"))
	if err != nil || string(got) != modelFiles["config/params.json"] {
		t.Fatalf("the input on the node holds %q (%v); want the first job's file", got, err)
	}
	// The first job may go; the blobs stay while a job that takes them has not ended.
	if err := c.DeleteJob(context.Background(), "lab", first.ID); err != nil {
		t.Fatal(err)
	}
	if bytes, _ := st.Usage(); bytes == 0 {
		t.Fatal("the output a running job takes as input was collected")
	}
}

// An engine that stops while it takes an output in records nothing: the exit is applied
// again when it comes back (here, by the driver's event), and the job ends Completed with
// its whole output, the interrupted intake's leftovers collected.
func TestAnInterruptedIntakeRegistersNothingAndIsDoneAgain(t *testing.T) {
	env, c, st := setupFiles(t)
	j, nodes := runWithOutput(t, env, c, "again", 1)
	task := env.Job("lab", j.ID).TaskKey(0)
	writeFiles(t, filepath.Join(env.Driver.WorkDir(nodes[0], task), "outputs", "model"), modelFiles)
	stopped, stop := context.WithCancel(context.Background())
	stop()
	c.TaskExited(stopped, nodes[0], task, 0)
	if mid := env.Job("lab", j.ID); mid.Status != api.JobRunning || mid.Outputs["model"].Digest != "" || len(mid.RankExits) != 0 {
		t.Fatalf("after an interrupted intake the job is %s with %+v, exits %v; want it untouched", mid.Status, mid.Outputs, mid.RankExits)
	}
	env.Driver.FinishTask(nodes[0], task, 0)
	env.Settle()
	done := env.Job("lab", j.ID)
	if done.Status != api.JobCompleted || done.Outputs["model"].FileCount != 3 {
		t.Fatalf("job %s with %+v; want Completed with its 3 files", done.Status, done.Outputs)
	}
	if _, _, err := c.CollectArtifacts(); err != nil {
		t.Fatal(err)
	}
	// Two distinct contents and the manifest: nothing else survives.
	if bytes, blobs := st.Usage(); blobs != 3 {
		t.Fatalf("the store holds %d blobs (%d bytes); want 2 contents and 1 manifest", blobs, bytes)
	}
}

// An online endpoint that serves a job's output as its model keeps the output's blobs from
// collection after the job is deleted; once no endpoint references it, it goes.
func TestAnEndpointsModelIsKeptFromCollection(t *testing.T) {
	env, c, st := setupFiles(t)
	j, digest := completeWithModel(t, env, c, "train")
	ep := model.Endpoint{Workspace: "lab", Name: "churn", Deployments: map[string]model.Deployment{
		"blue": {Spec: api.DeploymentSpec{ModelPath: api.JobOutputURI(j.ID, "model"), ModelDigest: digest}},
	}}
	if err := env.Store.Update(func(tx *store.Tx) error { return tx.Put(store.Endpoints, ep.Key(), ep) }); err != nil {
		t.Fatal(err)
	}
	bytesBefore, blobsBefore := st.Usage()
	if err := c.DeleteJob(context.Background(), "lab", j.ID); err != nil {
		t.Fatal(err)
	}
	if got, blobs := st.Usage(); got != bytesBefore || blobs != blobsBefore || blobs == 0 {
		t.Fatalf("with the endpoint's model the store holds %d bytes in %d blobs; want all of the output's %d in %d", got, blobs, bytesBefore, blobsBefore)
	}
	if err := st.Verify(context.Background(), digest); err != nil {
		t.Fatalf("the endpoint's model after the job's delete: %v", err)
	}
	if err := env.Store.Update(func(tx *store.Tx) error { return tx.Delete(store.Endpoints, ep.Key()) }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CollectArtifacts(); err != nil {
		t.Fatal(err)
	}
	if got, blobs := st.Usage(); got != 0 || blobs != 0 {
		t.Fatalf("after the endpoint went the store holds %d bytes in %d blobs; want none", got, blobs)
	}
}

// A rw_mount output is the engine's own directory: at exit 0 the engine reads it as it
// reads a node's output (a uri_file's one file under the output's name), and a socket
// there fails the job naming the output and the file.
func TestRWMountOutputsAreTakenFromTheEnginesDirectory(t *testing.T) {
	env, c, _ := setupFilesWith(t, jobs.Config{SharedFilesystem: true})
	j := submit(t, c, api.JobSpec{Name: "mounted", Compute: "cpu", Command: []string{"train"},
		Outputs: map[string]api.JobOutput{"m": {Mode: api.ModeRWMount}, "f": {Mode: api.ModeRWMount, Type: api.URIFile}}}, "")
	env.Settle()
	rec := env.Job("lab", j.ID)
	writeFiles(t, env.Core.MountPath(rec.Job, model.OutputsDir, "m"), modelFiles)
	writeFiles(t, env.Core.MountPath(rec.Job, model.OutputsDir, "f"), map[string]string{"f": "one file"})
	env.Driver.FinishTask(rec.Nodes[0], rec.TaskKey(0), 0)
	env.Settle()
	done := env.Job("lab", j.ID)
	if done.Status != api.JobCompleted || done.Outputs["m"].FileCount != 3 || done.Outputs["f"].FileCount != 1 {
		t.Fatalf("job %s (%s), outputs %+v; want Completed with 3 files and 1", done.Status, done.Error, done.Outputs)
	}
	for name, want := range map[string]map[string]string{"m": modelFiles, "f": {"f": "one file"}} {
		var buf bytes.Buffer
		if err := c.WriteOutput(context.Background(), &buf, done.Outputs[name].Digest); err != nil {
			t.Fatal(err)
		}
		if got := tarFiles(t, &buf); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("output %s holds %v; want %v", name, got, want)
		}
	}

	j = submit(t, c, api.JobSpec{Name: "socket", Compute: "cpu", Command: []string{"train"},
		Outputs: map[string]api.JobOutput{"m": {Mode: api.ModeRWMount}}}, "")
	env.Settle()
	rec = env.Job("lab", j.ID)
	dir := env.Core.MountPath(rec.Job, model.OutputsDir, "m")
	writeFiles(t, dir, modelFiles)
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil { // socket paths are short: bind a relative one
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", "sock")
	_ = os.Chdir(wd)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env.Driver.FinishTask(rec.Nodes[0], rec.TaskKey(0), 0)
	env.Settle()
	failed := env.Job("lab", j.ID)
	if failed.Status != api.JobFailed || !strings.Contains(failed.Error, `output "m": `) || !strings.Contains(failed.Error, "output file m/sock is a socket") || failed.Outputs["m"].Digest != "" {
		t.Fatalf("job %s (%q), output %+v; want Failed naming m/sock with nothing registered", failed.Status, failed.Error, failed.Outputs["m"])
	}
}
