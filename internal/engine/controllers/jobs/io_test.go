package jobs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes/computestest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/jobs"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

func ptr[T any](v T) *T { return &v }

// registered stores a finished job with one output, as a Completed job with its output
// taken in would be.
func registered(t *testing.T, env *computestest.Env, id, status string, outputs map[string]api.JobOutput) {
	t.Helper()
	j := env.PutJob("lab/cpu", id, 1)
	j.Outputs = outputs
	j.Finish(status, ptr(0), "", computestest.Start)
	if err := env.Store.Update(func(tx *store.Tx) error { return model.PutJob(tx, j) }); err != nil {
		t.Fatal(err)
	}
}

func TestSubmitBindsInputsAndOutputsInTheCommand(t *testing.T) {
	env, c := setup(t)
	registered(t, env, "prep", api.JobCompleted, map[string]api.JobOutput{
		"model": {Type: api.URIFolder, Mode: api.ModeUpload, Digest: "sha256:abc", Size: 10, FileCount: 2},
		"best":  {Type: api.URIFile, Mode: api.ModeUpload, Digest: "sha256:def", Size: 3, FileCount: 1},
	})
	j := submit(t, c, api.JobSpec{
		Name: "train-2", Compute: "cpu", DisplayName: "second", Tags: map[string]string{"a": "b"},
		Command: []string{"sh", "-c", "train --lr ${{inputs.lr}} --from ${{inputs.base}} --best ${{ inputs.best }} --out ${{outputs.model}} --report ${{outputs.report}}"},
		Inputs: map[string]api.JobInput{
			"lr":   {Value: ptr("0.01")},
			"base": {Type: api.URIFolder, Path: "azureml://jobs/prep/outputs/model"},
			"best": {Type: api.URIFile, Path: "azureml://jobs/prep/outputs/best"},
		},
		Outputs: map[string]api.JobOutput{"model": {}, "report": {Type: api.URIFile}},
	}, "")
	if j.ID != "train-2" || j.DisplayName != "second" || j.Tags["a"] != "b" {
		t.Fatalf("job = %+v; want it named train-2 with its display name and tags", j)
	}
	want := "train --lr 0.01 --from ${MLCOMPUTE_WORK_DIR}/inputs/base --best ${MLCOMPUTE_WORK_DIR}/inputs/best/best" +
		" --out ${MLCOMPUTE_WORK_DIR}/outputs/model --report ${MLCOMPUTE_WORK_DIR}/outputs/report/report"
	if j.Command[2] != want {
		t.Fatalf("command = %q\nwant      %q", j.Command[2], want)
	}
	base := j.Inputs["base"]
	if base.Digest != "sha256:abc" || base.Size != 10 || base.FileCount != 2 || base.Mode != api.ModeDownload {
		t.Fatalf("input base = %+v; want the registered output's digest, size and count, mode download", base)
	}
	if out := j.Outputs["model"]; out.Type != api.URIFolder || out.Mode != api.ModeUpload || out.Digest != "" {
		t.Fatalf("output model = %+v; want an unregistered uri_folder to upload", out)
	}
	_, err := c.SubmitJob(context.Background(), "lab", api.JobSpec{Name: "train-2", Compute: "cpu", Command: []string{"x"}}, "")
	_ = computestest.WantError(t, err, api.CodeConflict, "name")
	// A job named like the engine's own IDs does not make a later job overwrite it.
	named := submit(t, c, api.JobSpec{Name: "job-00000004", Compute: "cpu", Command: []string{"x"}}, "")
	next := submit(t, c, api.JobSpec{Compute: "cpu", Command: []string{"y"}}, "")
	if next.ID == named.ID || env.Job("lab", named.ID).Command[0] != "x" {
		t.Fatalf("a sequential job took the name %s", named.ID)
	}
}

func TestSubmitRefusesInputsAndOutputsNamingWhich(t *testing.T) {
	env, c := setup(t)
	registered(t, env, "done", api.JobCompleted, map[string]api.JobOutput{"model": {Type: api.URIFolder, Digest: "sha256:abc"}})
	registered(t, env, "broke", api.JobFailed, map[string]api.JobOutput{"model": {Type: api.URIFolder}})
	folder := func(path string) map[string]api.JobInput {
		return map[string]api.JobInput{"d": {Type: api.URIFolder, Path: path}}
	}
	for _, tc := range []struct {
		name    string
		spec    api.JobSpec
		code    api.ErrorCode
		field   string
		message string
	}{
		{"unknown job", api.JobSpec{Inputs: folder("azureml://jobs/nope/outputs/model")}, api.CodeNotFound, "inputs.d.path", `job "nope" not found`},
		{"unknown output", api.JobSpec{Inputs: folder("azureml://jobs/done/outputs/weights")}, api.CodeNotFound, "inputs.d.path", `job "done" has no output "weights" (its outputs: model)`},
		{"failed job", api.JobSpec{Inputs: folder("azureml://jobs/broke/outputs/model")}, api.CodeConflict, "inputs.d.path", `job "broke" is Failed`},
		{"type mismatch", api.JobSpec{Inputs: map[string]api.JobInput{"d": {Type: api.URIFile, Path: "azureml://jobs/done/outputs/model"}}}, api.CodeInvalid, "inputs.d.type", "is a uri_file but"},
		{"no source", api.JobSpec{Inputs: folder("")}, api.CodeInvalid, "inputs.d.path", "needs a snapshot_id"},
		{"unknown snapshot", api.JobSpec{Inputs: map[string]api.JobInput{"d": {SnapshotID: "s1"}}}, api.CodeInvalid, "inputs.d", "keeps no snapshots"},
		{"mount not shared", api.JobSpec{Inputs: map[string]api.JobInput{"d": {Path: "azureml://jobs/done/outputs/model", Mode: api.ModeROMount}}}, api.CodeInvalid, "inputs.d.mode", "share the engine's filesystem"},
		{"rw_mount not shared", api.JobSpec{Outputs: map[string]api.JobOutput{"m": {Mode: api.ModeRWMount}}}, api.CodeInvalid, "outputs.m.mode", "use mode upload"},
		{"bad input mode", api.JobSpec{Inputs: map[string]api.JobInput{"d": {Path: "azureml://jobs/done/outputs/model", Mode: api.ModeUpload}}}, api.CodeInvalid, "inputs.d.mode", "allowed: download, ro_mount"},
		{"bad output type", api.JobSpec{Outputs: map[string]api.JobOutput{"m": {Type: "mltable"}}}, api.CodeInvalid, "outputs.m.type", "allowed: uri_folder, uri_file"},
		{"output digest", api.JobSpec{Outputs: map[string]api.JobOutput{"m": {Digest: "sha256:x"}}}, api.CodeInvalid, "outputs.m", "the engine's to set"},
		{"bad name", api.JobSpec{Outputs: map[string]api.JobOutput{"../m": {}}}, api.CodeInvalid, "outputs.../m", "output name"},
		{"literal and path", api.JobSpec{Inputs: map[string]api.JobInput{"d": {Value: ptr("1"), Path: "x"}}}, api.CodeInvalid, "inputs.d", "a literal input has a value and nothing else"},
		{"undeclared binding", api.JobSpec{Command: []string{"cat ${{inputs.x}}"}}, api.CodeInvalid, "command", "names an input the job does not declare (inputs: none)"},
		{"other binding", api.JobSpec{Command: []string{"${{jobs.a}}"}}, api.CodeInvalid, "command", "is not supported"},
		{"job name", api.JobSpec{Name: "a/b"}, api.CodeInvalid, "name", "job name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Compute = "cpu"
			if tc.spec.Command == nil {
				tc.spec.Command = []string{"x"}
			}
			_, err := c.SubmitJob(context.Background(), "lab", tc.spec, "")
			e := computestest.WantError(t, err, tc.code, tc.field)
			if !strings.Contains(e.Message, tc.message) {
				t.Fatalf("message %q; want it to hold %q", e.Message, tc.message)
			}
		})
	}
}

func TestMountsNameTheEnginesDirectoriesWhereNodesShareIt(t *testing.T) {
	env, c := setupWith(t, jobs.Config{SharedFilesystem: true})
	registered(t, env, "done", api.JobCompleted, map[string]api.JobOutput{"model": {Type: api.URIFolder, Digest: "sha256:abc"}})
	j := submit(t, c, api.JobSpec{
		Compute: "cpu", Command: []string{"cp -r ${{inputs.d}} ${{outputs.m}}"},
		Inputs:  map[string]api.JobInput{"d": {Path: "azureml://jobs/done/outputs/model", Mode: api.ModeROMount}},
		Outputs: map[string]api.JobOutput{"m": {Mode: api.ModeRWMount}},
	}, "")
	want := "cp -r " + env.Core.JobDir(j.ID) + "/inputs/d " + env.Core.JobDir(j.ID) + "/outputs/m"
	if j.Command[0] != want {
		t.Fatalf("command = %q; want %q", j.Command[0], want)
	}
}
