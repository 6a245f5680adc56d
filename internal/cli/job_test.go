package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/jobfile"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/syncbuf"
)

func TestJobSubmitWithoutCommandShowsAnExample(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{})
	_, _, err := runCLI(e, "job", "submit", "--workspace", "lab", "--compute", "cpu")
	if err == nil {
		t.Fatal("job submit with no command succeeded")
	}
	for _, want := range []string{"no command to run", "after --", "mlcompute job submit --workspace lab --compute cpu -- python train.py"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q; want it to contain %q", err, want)
		}
	}
}

// --stream tells on stderr, as it happens, why a job waits: queued while its node comes up
// (with the driver's pending reason), then running, then its output and exit code.
func TestJobSubmitStreamShowsStatusChanges(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{Fake: fake.Options{CreatePending: true, PendingReason: "Resources"}})
	c := e.Client(t, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}); err != nil {
		t.Fatal(err)
	}
	root := NewRootCommand(Config{Use: "mlcompute", Version: "test"})
	var stdout, stderr syncbuf.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"--endpoint", e.Endpoint, "job", "submit", "--workspace", "lab", "--compute", "cpu", "--stream", "--", "python", "train.py"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if cond() {
				return
			}
		}
		t.Fatalf("never: %s; stderr:\n%s", what, stderr.String())
	}
	waitFor("queued with the pending reason", func() bool {
		return strings.Contains(stderr.String(), "(Resources)")
	})
	nodes := e.Driver.Nodes()
	if len(nodes) != 1 {
		t.Fatalf("nodes %v; want one", nodes)
	}
	e.Driver.MakeReady(nodes[0])
	waitFor("running", func() bool { return strings.Contains(stderr.String(), ": Running on "+nodes[0]) })
	var node, task string
	waitFor("the task started", func() bool {
		if r := e.Driver.RunningTasks(); len(r) == 1 {
			node, task, _ = strings.Cut(r[0], "/")
			return true
		}
		return false
	})
	e.Driver.AppendOutput(node, task, []byte("epoch 1\n"))
	e.Driver.FinishTask(node, task, 0)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("job submit --stream: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("job submit --stream never ended; stderr:\n%s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "epoch 1") {
		t.Fatalf("stdout %q; want the job's output", stdout.String())
	}
	t.Logf("stderr:\n%s", stderr.String())
	// Each status is told once, in order.
	err := stderr.String()
	q, r := strings.Index(err, "Queued ("), strings.Index(err, "Running on")
	if q < 0 || r < q || strings.Count(err, "Running on") != 1 {
		t.Fatalf("stderr:\n%s\nwant Queued, then Running once", err)
	}
}

// A pipeline whose default compute the workspace does not have is refused by the engine
// at submit; the CLI names the YAML path and its line. Flags that set a command job's
// fields are refused beside a pipeline's file.
func TestJobSubmitPipelineRefusesAnUnknownComputeAtItsLine(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{})
	c := e.Client(t, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	yaml := "type: pipeline\nsettings:\n  default_compute: azureml:tpu\njobs:\n  a:\n    command: echo a\n  b:\n    compute: cpu\n    command: echo b\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCLI(e, "job", "submit", "--workspace", "lab", "-f", file)
	want := `pipeline.yaml: line 3: settings.default_compute: unknown compute "tpu" in workspace "lab" (computes: cpu)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v; want %q", err, want)
	}
	_, _, err = runCLI(e, "job", "submit", "--workspace", "lab", "-f", file, "--compute", "cpu")
	if err == nil || !strings.Contains(err.Error(), "--compute sets a command job's compute; a pipeline's steps take theirs from the file") {
		t.Fatalf("error %v", err)
	}
	if jobs, _ := c.ListJobs(ctx, "lab"); len(jobs) != 0 {
		t.Fatalf("refused pipelines left jobs: %+v", jobs)
	}
}

// A uri_file input is copied into a directory of its own to be packed; the copy keeps the
// file's time, so the same file uploaded twice is the same snapshot (and a pipeline step
// taking it can be reused).
func TestUploadInputsOfAnUnchangedFileGivesTheSameSnapshot(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{})
	c := e.Client(t, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rows.csv")
	if err := os.WriteFile(file, []byte("a,b\n1,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(file, old, old); err != nil {
		t.Fatal(err)
	}
	upload := func() string {
		spec := &api.JobSpec{Inputs: map[string]api.JobInput{"rows": {Type: api.URIFile, FileName: "rows.csv"}}}
		if err := jobfile.UploadInputs(ctx, c, "lab", spec, map[string]string{"rows": file}); err != nil {
			t.Fatal(err)
		}
		return spec.Inputs["rows"].SnapshotID
	}
	first := upload()
	time.Sleep(1100 * time.Millisecond) // a copy made a second later would carry a newer time
	if second := upload(); first == "" || second != first {
		t.Fatalf("the same file uploaded twice: snapshots %q and %q; want one", first, second)
	}
}
