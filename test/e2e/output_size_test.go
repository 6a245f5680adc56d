//go:build unix

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh/sshtest"
)

// Output sizes of TestE2E_LargeOutputAcrossDrivers: 5,000 files of 40 KiB, 200 MiB in all.
const (
	largeOutputFiles    = 5000
	largeOutputFileSize = 40 << 10
)

// largeOutputFile is the content the job writes into file i: its own byte, repeated, so the
// test knows every file without keeping a copy of the job's.
func largeOutputFile(i int) (name string, content []byte) {
	return fmt.Sprintf("d%02d/f%04d.bin", i%50, i), bytes.Repeat([]byte{byte(i % 251)}, largeOutputFileSize)
}

// TestE2E_LargeOutputAcrossDrivers: a job on an attached machine (a real sshd in its own
// network namespace) writes an output of 5,000 files, 200 MiB; the engine takes it in over
// SSH. Its manifest digest is the one the test computes from the files, `job download`
// gives the same tree byte for byte, and a second job on a local cluster takes the output
// as azureml://jobs/<job>/outputs/model and reads every file of it, with the same digest.
func TestE2E_LargeOutputAcrossDrivers(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	h := sshtest.Start(t)
	u.writeConfig(clusterConfig + fmt.Sprintf(`
resource "mlcompute_attached_compute" "box" {
  name         = "box"
  workspace_id = mlcompute_workspace.ws.id
  virtual_machine = {
    address     = %q
    ssh_port    = %d
    username    = %q
    private_key = file(%q)
  }
}
`, h.Address, h.Port, h.User, h.KeyFile(t)))
	u.mustTerraform("apply", "-auto-approve")

	want := map[string][]byte{}
	files := make([]artifacts.File, 0, largeOutputFiles)
	for i := range largeOutputFiles {
		name, content := largeOutputFile(i)
		want[name] = content
		sum := sha256.Sum256(content)
		files = append(files, artifacts.File{Path: name, Size: int64(len(content)), Digest: "sha256:" + hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(files, func(a, b artifacts.File) int { return strings.Compare(a.Path, b.Path) })
	wantDigest, err := artifacts.Manifest{Type: artifacts.TypeFolder, Files: files}.Digest()
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The job's python writes what largeOutputFile describes.
	write("make.py", fmt.Sprintf(`import os, sys
out = sys.argv[1]
for i in range(%d):
    d = os.path.join(out, "d%%02d" %% (i %% 50))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%%04d.bin" %% i), "wb") as f:
        f.write(bytes([i %% 251]) * %d)
`, largeOutputFiles, largeOutputFileSize))
	big := write("big.yaml", `type: command
name: big-ssh
code: .
compute: azureml:box
command: python3 make.py ${{outputs.model}}
outputs:
  model:
    type: uri_folder
`)
	if out, code := u.cli("job", "submit", "--workspace", "e2e-team", "-f", big, "--stream"); code != 0 {
		t.Fatalf("the job on the attached machine exited %d:\n%s", code, out)
	}
	var job api.Job
	out, _ := u.cli("job", "show", "--workspace", "e2e-team", "big-ssh", "-o", "json")
	decodeJSON(t, out, &job)
	model := job.Outputs["model"]
	if job.Status != api.JobCompleted || model.Digest != wantDigest || model.FileCount != largeOutputFiles ||
		model.Size != largeOutputFiles*largeOutputFileSize {
		t.Fatalf("job %s with output %+v; want Completed with digest %s, %d files, %d bytes",
			job.Status, model, wantDigest, largeOutputFiles, largeOutputFiles*largeOutputFileSize)
	}
	checkDownload(u, "big-ssh", want)

	read := write("read.yaml", `type: command
name: read-local
compute: azureml:cpu
command: find ${{inputs.model}} -type f | wc -l && cat ${{inputs.model}}/d*/*.bin | wc -c
inputs:
  model:
    type: uri_folder
    path: azureml://jobs/big-ssh/outputs/model
`)
	out, code := u.cli("job", "submit", "--workspace", "e2e-team", "-f", read, "--stream")
	if fields := strings.Fields(out); code != 0 || !slices.Contains(fields, fmt.Sprint(largeOutputFiles)) ||
		!slices.Contains(fields, fmt.Sprint(largeOutputFiles*largeOutputFileSize)) {
		t.Fatalf("the job on the local cluster exited %d; want it to count %d files and %d bytes:\n%s",
			code, largeOutputFiles, largeOutputFiles*largeOutputFileSize, out)
	}
	out, _ = u.cli("job", "show", "--workspace", "e2e-team", "read-local", "-o", "json")
	var reader api.Job
	decodeJSON(t, out, &reader)
	if in := reader.Inputs["model"]; in.Digest != wantDigest {
		t.Fatalf("the reading job's input has digest %q; want the output's %s", in.Digest, wantDigest)
	}
	u.mustTerraform("destroy", "-auto-approve")
}
