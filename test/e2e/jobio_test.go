//go:build unix

package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// TestE2E_JobOutputsAndInputs: a job submitted from YAML copies a local input of many
// files into its output; job download gives the same tree byte for byte; a second job
// takes the output as azureml://jobs/<job>/outputs/model and reads it; a job that writes
// half its output and exits 1 registers nothing; deleting the jobs leaves no blob; a backup
// taken before, extracted into a fresh data dir, downloads the same tree.
func TestE2E_JobOutputsAndInputs(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	u.writeConfig(clusterConfig)
	u.mustTerraform("apply", "-auto-approve")

	src := t.TempDir()
	data := filepath.Join(src, "data")
	want := map[string][]byte{}
	for i := range 500 {
		name := fmt.Sprintf("shard-%02d/part-%04d.bin", i%10, i)
		content := bytes.Repeat([]byte{byte(i)}, 100+i*37)
		want[name] = content
		if err := os.MkdirAll(filepath.Join(data, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want["tag.txt"] = []byte("v7\n")
	writeYAML := func(name, body string) string {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	train := writeYAML("train.yaml", `$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
type: command
name: train-e2e
compute: azureml:cpu
command: cp -R ${{inputs.data}}/. ${{outputs.model}}/ && echo ${{inputs.tag}} > ${{outputs.model}}/tag.txt
inputs:
  data:
    type: uri_folder
    path: ./data
  tag: v7
outputs:
  model:
    type: uri_folder
`)
	out, code := u.cli("job", "submit", "--workspace", "e2e-team", "-f", train, "--stream")
	if code != 0 {
		t.Fatalf("train job exited %d:\n%s", code, out)
	}
	out, code = u.cli("job", "show", "--workspace", "e2e-team", "train-e2e", "-o", "json")
	if code != 0 {
		t.Fatalf("job show: %s", out)
	}
	var job api.Job
	decodeJSON(t, out, &job)
	model := job.Outputs["model"]
	if job.Status != api.JobCompleted || model.FileCount != int64(len(want)) || !strings.HasPrefix(model.Digest, "sha256:") {
		t.Fatalf("train job %s, output %+v; want Completed with %d files", job.Status, model, len(want))
	}

	checkDownload(u, "train-e2e", want)

	// A backup holds the output (restored at the end, into a fresh data dir).
	backup := filepath.Join(t.TempDir(), "backup.tar")
	if out, code := u.cli("backup", backup); code != 0 {
		t.Fatalf("backup exited %d:\n%s", code, out)
	}

	read := writeYAML("read.yaml", `type: command
compute: cpu
command: cat ${{inputs.model}}/tag.txt && ls ${{inputs.model}}/shard-03 | wc -l
inputs:
  model:
    type: uri_folder
    path: azureml://jobs/train-e2e/outputs/model
`)
	out, code = u.cli("job", "submit", "--workspace", "e2e-team", "-f", read, "--stream")
	if code != 0 || !strings.Contains(out, "v7") || !strings.Contains(out, "50") {
		t.Fatalf("the reading job exited %d; want it to print v7 and 50 files:\n%s", code, out)
	}
	missing := writeYAML("missing.yaml", strings.Replace(string(mustRead(t, read)), "train-e2e", "nope", 1))
	if out, code := u.cli("job", "submit", "--workspace", "e2e-team", "-f", missing); code == 0 || !strings.Contains(out, `job "nope" not found`) {
		t.Fatalf("an input of an unknown job was not refused, naming it (exit %d):\n%s", code, out)
	}

	half := writeYAML("half.yaml", `type: command
name: half-e2e
compute: cpu
command: echo half > ${{outputs.model}}/part-1 && exit 1
outputs:
  model:
`)
	if out, code := u.cli("job", "submit", "--workspace", "e2e-team", "-f", half, "--stream"); code != 1 {
		t.Fatalf("the half job exited %d; want 1:\n%s", code, out)
	}
	out, _ = u.cli("job", "show", "--workspace", "e2e-team", "half-e2e", "-o", "json")
	var failed api.Job
	decodeJSON(t, out, &failed)
	if failed.Status != api.JobFailed || failed.Outputs["model"].Digest != "" {
		t.Fatalf("the half job is %s with output %+v; want Failed with nothing registered", failed.Status, failed.Outputs["model"])
	}
	for _, id := range []string{"train-e2e", "half-e2e"} {
		if out, code := u.cli("job", "delete", "--workspace", "e2e-team", id); code != 0 {
			t.Fatalf("job delete %s exited %d:\n%s", id, code, out)
		}
	}
	var blobs []string
	_ = filepath.WalkDir(filepath.Join(u.home, "artifacts", "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			blobs = append(blobs, p)
		}
		return nil
	})
	if len(blobs) != 0 {
		t.Fatalf("after the jobs were deleted the store holds %d blobs; want none", len(blobs))
	}

	// The backup taken before the deletes, extracted into a fresh data dir once this engine
	// stopped (the restored one takes over its scoring port), downloads the same output.
	if out, code := u.cli("shutdown"); code != 0 {
		t.Fatalf("shutdown exited %d:\n%s", code, out)
	}
	restored := newUser(t)
	if out, err := exec.Command("tar", "-xf", backup, "-C", restored.home).CombinedOutput(); err != nil {
		t.Fatalf("tar -xf %s: %v: %s", backup, err, out)
	}
	checkDownload(restored, "train-e2e", want)
}

// checkDownload downloads the job's output "model" and compares it with want, file by
// file (the CLI itself checks every digest).
func checkDownload(u *user, job string, want map[string][]byte) {
	u.t.Helper()
	dl := u.t.TempDir()
	if out, code := u.cli("job", "download", "--workspace", "e2e-team", job, "--output-name", "model", "--download-path", dl); code != 0 {
		u.t.Fatalf("job download exited %d:\n%s", code, out)
	}
	got := map[string][]byte{}
	root := filepath.Join(dl, "named-outputs", "model")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		got[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		u.t.Fatal(err)
	}
	if len(got) != len(want) {
		u.t.Fatalf("downloaded %d files; want %d", len(got), len(want))
	}
	for name, content := range want {
		if !bytes.Equal(got[name], content) {
			u.t.Fatalf("downloaded %s differs from what the job wrote (%d bytes, want %d)", name, len(got[name]), len(content))
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
