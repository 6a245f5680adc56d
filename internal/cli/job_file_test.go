package cli

import (
	"io"
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
	_, _, _, err := jobFromFile(&cobra.Command{}, submitFlags{file: file}, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "pipeline jobs are checked but cannot be submitted yet") {
		t.Fatalf("error %v", err)
	}
	// A pipeline with a bad binding is refused for the binding, at its line.
	bad := yaml + "    inputs:\n      d: ${{parent.jobs.b.outputs.o}}\n"
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = jobFromFile(&cobra.Command{}, submitFlags{file: file}, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `line 8: jobs.a.inputs.d: unknown step "b" (steps: a)`) {
		t.Fatalf("error %v", err)
	}
}
