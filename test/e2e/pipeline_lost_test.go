//go:build unix

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// allocationLostYAML is prep -> train on the cluster cpu of a driver's nodes. Each step
// prints WHERE (a shell expression naming what it runs on: a Slurm job, a pod). train's
// first run never ends by itself (the test takes its node away under it); the next run
// (job <pipeline>-train-requeue1 after a node loss, -retry1 after a failure) finishes.
const allocationLostYAML = `type: pipeline
settings:
  default_compute: azureml:cpu
jobs:
  prep:
    command: echo "prep on WHERE" && echo 7 > ${{outputs.data}}/n
    outputs:
      data:
        type: uri_folder
  train:
    command: echo "train on WHERE" && case "$MLCOMPUTE_JOB_ID" in *-requeue*|*-retry*) ;; *) sleep 600 ;; esac && cp ${{inputs.data}}/n ${{outputs.model}}/n
    inputs:
      data: ${{parent.jobs.prep.outputs.data}}
    outputs:
      model:
        type: uri_folder
    retry_settings:
      max_retries: 1
`

// pipelineLosingANode runs allocationLostYAML (WHERE replaced by where) on the user's
// cluster cpu; while train runs, lose(node) takes train's node away (scancel of its
// allocation, deletion of its pod). It checks that each step's log matches onNode (it ran
// on the driver's nodes), that train's job leaves Running within 30 s of the loss (no step
// stays Running without a live allocation), Failed, and that the pipeline then completes
// with prep's output passed on by digest and train run again: as
// <pipeline>-train-requeue1, using no retry, when the engine saw the node lost; as
// <pipeline>-train-retry1, using its one retry, when the step's process ended first (its
// exit status is then the job's). It returns whether the node loss was seen.
func (u *user) pipelineLosingANode(where string, onNode *regexp.Regexp, lose func(node string)) (nodeLost bool) {
	t := u.t
	t.Helper()
	file := filepath.Join(u.workDir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(allocationLostYAML, "WHERE", where)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := u.cli("job", "submit", "--workspace", "e2e-team", "-f", file)
	if code != 0 {
		t.Fatalf("job submit -f: exit %d: %s", code, out)
	}
	id := strings.TrimSpace(out)
	logs := func(job string) string {
		out, _ := u.cli("job", "logs", "--workspace", "e2e-team", job)
		return out
	}
	var (
		first    api.Job
		firstLog string
	)
	u.waitFor("train running", 3*time.Minute, func() bool {
		out, code := u.cli("job", "show", "--workspace", "e2e-team", id+"-train", "-o", "json")
		if code != 0 { // not submitted yet: prep runs
			return false
		}
		decodeJSON(t, out, &first)
		firstLog = logs(first.ID)
		return first.Status == api.JobRunning && strings.Contains(firstLog, "train on ")
	})
	if len(first.Nodes) != 1 {
		t.Fatalf("train's job runs on %v; want one node", first.Nodes)
	}
	lose(first.Nodes[0])
	lost := time.Now()
	u.waitFor("train's job no longer Running after its node was taken away", 30*time.Second, func() bool {
		return u.showJob("e2e-team", first.ID).Status != api.JobRunning
	})
	t.Logf("train's job left Running %s after its node was taken away", time.Since(lost).Round(10*time.Millisecond))
	j := u.showJob("e2e-team", first.ID)
	if j.Status != api.JobFailed {
		t.Fatalf("train's first job: %s (%s); want Failed", j.Status, j.Error)
	}
	nodeLost = strings.Contains(j.Error, "was lost")
	t.Logf("train's first job: %s (%s)", j.Status, j.Error)

	var p api.Job
	u.waitFor("pipeline ended", 3*time.Minute, func() bool { p = u.showJob("e2e-team", id); return api.Terminal(p.Status) })
	if p.Status != api.JobCompleted {
		t.Fatalf("pipeline %s (%s): %+v", p.Status, p.Error, p.Steps)
	}
	var train api.PipelineStep
	for _, s := range p.Steps {
		if s.Name == "train" {
			train = s
		}
	}
	want, retries := id+"-train-retry1", int64(1)
	if nodeLost {
		want, retries = id+"-train-requeue1", 0
	}
	if train.Job != want || train.Retries != retries {
		t.Fatalf("train step %+v; want job %s and %d retries used", train, want, retries)
	}
	again, prep := u.showJob("e2e-team", train.Job), u.showJob("e2e-team", id+"-prep")
	if d := prep.Outputs["data"].Digest; d == "" || again.Inputs["data"].Digest != d || again.Outputs["model"].Digest == "" {
		t.Fatalf("prep registered %q, the requeued train took %q and registered %q", d, again.Inputs["data"].Digest, again.Outputs["model"].Digest)
	}
	// The first run's log as it ran (what is left of it once its node is gone depends on
	// the driver: a deleted pod takes its log files with it).
	t.Logf("%s's log after its node was lost: %q", first.ID, logs(first.ID))
	for job, l := range map[string]string{prep.ID: logs(prep.ID), first.ID: firstLog, again.ID: logs(again.ID)} {
		if !onNode.MatchString(l) {
			t.Errorf("%s's log does not show it ran on the driver's node (%s):\n%s", job, onNode, l)
		} else {
			t.Logf("%s: %s", job, onNode.FindString(l))
		}
	}
	return nodeLost
}
