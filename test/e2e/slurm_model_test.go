//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm/slurmtest"
)

// TestE2E_SlurmEndpointModel: an online endpoint whose instances are Slurm allocations
// serves models that reach them the way its code does, through the driver's copy of a
// task's files (no shared filesystem assumed): one deployment a local directory, one the
// output of a job that ran on the Slurm cluster. Each instance reads its model in
// AZUREML_MODEL_DIR at every request.
func TestE2E_SlurmEndpointModel(t *testing.T) {
	requireAcc(t)
	slurmtest.Start(t)
	u := newUser(t)
	u.startServe("--nodes", "slurm", "--slurm-resources", "gpus", "--slurm-workdir", t.TempDir())
	u.writeConfig(slurmClusterConfig)
	u.mustTerraform("apply", "-auto-approve")

	job := filepath.Join(u.workDir, "train.yaml")
	if err := os.WriteFile(job, []byte("type: command\nname: train-slurm\ncompute: cpu\ncommand: echo from-the-slurm-job > ${{outputs.model}}/MODEL\noutputs:\n  model:\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := u.cli("job", "submit", "--workspace", "e2e-team", "-f", job, "--stream"); code != 0 {
		t.Fatalf("the training job on Slurm exited %d:\n%s", code, out)
	}
	local := filepath.Join(u.workDir, "local-model")
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "MODEL"), []byte("from-a-local-dir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deployment := func(name, modelPath string) string {
		return fmt.Sprintf(`
    %s = {
      instance_type   = "Standard_DS2_v2"
      command         = [%q]
      model_path      = %q
      readiness_probe = { path = "/health", initial_delay = "PT0S", period = "PT1S" }
      liveness_probe  = { path = "/health", initial_delay = "PT0S", period = "PT1S" }
    }`, name, filepath.Join(binDir, "scorer"), modelPath)
	}
	u.writeConfig(slurmClusterConfig + fmt.Sprintf(`
resource "mlcompute_online_endpoint" "serving" {
  name         = "serving"
  workspace_id = mlcompute_workspace.ws.id
  deployments = {%s%s
  }
  traffic = { local = 50, trained = 50 }
}
`, deployment("local", local), deployment("trained", "azureml://jobs/train-slurm/outputs/model")))
	u.mustTerraform("apply", "-auto-approve")

	ctx := context.Background()
	ep := u.waitEndpoint("e2e-team", "serving", api.ProvisioningSucceeded)
	onSlurm := map[string]bool{}
	for _, k := range u.engineJobs() {
		onSlurm[k] = true
	}
	for name, d := range ep.Deployments {
		for _, in := range d.Instances {
			if !onSlurm[in.ID] {
				t.Fatalf("deployment %s's instance %s is no Slurm allocation of this engine (%v)", name, in.ID, u.engineJobs())
			}
		}
	}
	keys, err := u.client().GetEndpointKeys(ctx, "e2e-team", "serving")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"local": "from-a-local-dir", "trained": "from-the-slurm-job"} {
		if got := scoredModel(t, ep.ScoringURI, keys.PrimaryKey, name); got != want {
			t.Fatalf("deployment %s on Slurm serves model %q; want %q", name, got, want)
		}
	}
	u.mustTerraform("destroy", "-auto-approve")
}

// scoredModel sends one scoring request to a deployment and returns the "model" the
// scorer read from $AZUREML_MODEL_DIR/MODEL.
func scoredModel(t *testing.T, uri, key, deployment string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", uri, strings.NewReader(`{"rows": [[1, 2]]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("azureml-model-deployment", deployment)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Model string `json:"model"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("scoring deployment %s: status %d, %v", deployment, resp.StatusCode, err)
	}
	return body.Model
}
