package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func TestJobFileTimeoutIsSentInWholeSeconds(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		timeout string
		want    int64
	}{{"3600", 3600}, {"2h", 7200}, {"1500ms", 2}} {
		file := filepath.Join(dir, "job.yaml")
		if err := os.WriteFile(file, []byte("command: echo hi\ncompute: cpu\nlimits:\n  timeout: "+tc.timeout+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		spec, _, _, err := jobFromFile(&cobra.Command{}, submitFlags{file: file}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if spec.TimeoutSeconds != tc.want {
			t.Errorf("limits.timeout %s sent as %d s; want %d", tc.timeout, spec.TimeoutSeconds, tc.want)
		}
	}
}

// job show of a pipeline prints its steps as a tree: each under the step it waits on
// longest, with status, reused_from, duration, job and reason.
func TestPrintPipelineTree(t *testing.T) {
	at := func(s int) *time.Time { v := time.Date(2026, 3, 1, 9, 0, s, 0, time.UTC); return &v }
	j := &api.Job{ID: "p2", Type: api.JobTypePipeline, Status: api.JobFailed, Error: "steps failed: train", Steps: []api.PipelineStep{
		{Name: "prep", Job: "p2-prep", Status: api.JobCompleted, ReusedFrom: "p1/prep", StartedAt: at(0), EndedAt: at(0)},
		{Name: "score", Status: api.JobSkipped, Reason: "upstream train failed", Upstream: []string{"prep", "train"}},
		{Name: "train", Job: "p2-train", Status: api.JobFailed, Reason: "exit code 1", Upstream: []string{"prep"}, StartedAt: at(1), EndedAt: at(43)},
		{Name: "eval", Job: "p2-eval", Status: api.JobRunning, Upstream: []string{"prep"}, StartedAt: at(2)},
	}}
	var out strings.Builder
	printPipeline(&out, j)
	want := `job:     p2
type:    pipeline
status:  Failed
error:   steps failed: train
steps:
  prep: Completed  reused_from: p1/prep  0s  job p2-prep
     └─ train: Failed  42s  job p2-train  exit code 1
     └─ eval: Running  running  job p2-eval
        └─ score: Skipped  after prep, train  upstream train failed
`
	if out.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}
