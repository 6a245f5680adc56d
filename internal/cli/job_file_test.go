package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// A pipeline file is checked, then refused plainly: no engine part runs pipelines yet.
func TestJobFromFileRefusesPipeline(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pipeline.yaml")
	yaml := "type: pipeline\nsettings:\n  default_compute: cpu\njobs:\n  a:\n    command: echo\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := jobFromFile(&cobra.Command{}, submitFlags{file: file}, nil)
	if err == nil || !strings.Contains(err.Error(), "pipeline jobs are checked but cannot be submitted yet") {
		t.Fatalf("error %v", err)
	}
	// A pipeline with a bad binding is refused for the binding, at its line.
	bad := yaml + "    inputs:\n      d: ${{parent.jobs.b.outputs.o}}\n"
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = jobFromFile(&cobra.Command{}, submitFlags{file: file}, nil)
	if err == nil || !strings.Contains(err.Error(), `line 8: jobs.a.inputs.d: unknown step "b" (steps: a)`) {
		t.Fatalf("error %v", err)
	}
}

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
