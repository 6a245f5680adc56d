//go:build unix

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// examples/train-and-serve as its comments tell a user to run it: a job trains a model,
// the model is downloaded, and the endpoint serves it through model_path. Retraining on
// new data is a new manifest digest, and the apply that serves it rolls it out while
// requests keep coming, without failing one.
func TestE2E_TrainAndServeExample(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 not found: the example needs it (make test installs it: scripts/test-deps.sh)")
	}
	dir := filepath.Join(u.copyExamples(), "train-and-serve")
	u.mustTerraformIn(dir, "apply", "-auto-approve")

	train := func() (job string, out api.JobOutput) {
		t.Helper()
		raw, code := u.cli("job", "submit", "-f", filepath.Join(dir, "train", "job.yaml"), "--workspace", "mlops")
		if code != 0 {
			t.Fatalf("job submit: exit %d: %s", code, raw)
		}
		job = strings.TrimSpace(raw)
		if logs, code := u.cli("job", "logs", "--workspace", "mlops", job, "--follow"); code != 0 || !strings.Contains(logs, "trained on") {
			t.Fatalf("job logs --follow %s: exit %d: %s", job, code, logs)
		}
		raw, code = u.cli("job", "show", "--workspace", "mlops", job, "-o", "json")
		if code != 0 {
			t.Fatalf("job show: exit %d: %s", code, raw)
		}
		var j api.Job
		decodeJSON(t, raw, &j)
		if j.Status != api.JobCompleted || j.Outputs["model"].Digest == "" {
			t.Fatalf("training job %s is %s with outputs %+v; want Completed with model registered", job, j.Status, j.Outputs)
		}
		return job, j.Outputs["model"]
	}
	download := func(job string) modelFile {
		t.Helper()
		to := filepath.Join(u.workDir, "downloaded-"+job)
		if raw, code := u.cli("job", "download", "--workspace", "mlops", job, "--output-name", "model", "--download-path", to); code != 0 {
			t.Fatalf("job download %s: exit %d: %s", job, code, raw)
		}
		var m modelFile
		decodeJSON(t, string(mustRead(t, filepath.Join(to, "named-outputs", "model", "model.json"))), &m)
		return m
	}

	job1, out1 := train()
	model1 := download(job1)
	if model1.TrainedOn.Rows != 8 || len(model1.Weights) != 3 {
		t.Fatalf("downloaded model %+v; want 3 weights trained on the example's 8 rows", model1)
	}
	u.mustTerraformIn(dir, "apply", "-auto-approve", "-var", "model_job="+job1)
	if got := u.mustTerraformIn(dir, "output", "-raw", "model_digest"); got != out1.Digest {
		t.Fatalf("model_digest is %q; want the job output's digest %q", got, out1.Digest)
	}
	served := func(raw string) modelFile {
		t.Helper()
		var answer struct {
			Predictions []float64 `json:"predictions"`
			Model       modelFile `json:"model"`
		}
		decodeJSON(t, raw, &answer)
		if len(answer.Predictions) != 1 || answer.Predictions[0] <= 0.5 {
			t.Fatalf("the endpoint answered %s; want one churn probability above 0.5 for a short-tenure, many-calls customer", raw)
		}
		return answer.Model
	}
	raw, code := u.cli("endpoint", "invoke", "--workspace", "mlops", "churn", "--data", `{"data": [[0.5, 4, 1.0]]}`)
	if code != 0 {
		t.Fatalf("endpoint invoke: exit %d: %s", code, raw)
	}
	if got := served(raw); !got.equal(model1) {
		t.Fatalf("the endpoint serves %+v; want the downloaded model %+v", got, model1)
	}

	// New rows: the team retrains, and the new model goes out under load.
	data := filepath.Join(dir, "train", "data.csv")
	f, err := os.OpenFile(data, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("0.3,7,1.4,1\n6.0,0,0.1,0\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	job2, out2 := train()
	model2 := download(job2)
	if out2.Digest == out1.Digest || model2.TrainedOn.Rows != 10 {
		t.Fatalf("retraining on 10 rows gave digest %s (first %s) and model %+v; want a new model", out2.Digest, out1.Digest, model2)
	}
	plan, code := u.terraformIn(dir, "plan", "-detailed-exitcode", "-var", "model_job="+job2)
	if code != 2 || !strings.Contains(plan, out2.Digest) {
		t.Fatalf("plan with the retrained model: exit %d (want 2) and no new model_digest %s:\n%s", code, out2.Digest, plan)
	}

	uri := u.mustTerraformIn(dir, "output", "-raw", "scoring_uri")
	key := u.mustTerraformIn(dir, "output", "-raw", "primary_key")
	stop := make(chan struct{})
	var (
		sent, failed atomic.Int64
		byRows       [11]atomic.Int64 // responses by the rows the serving model was trained on
		mu           sync.Mutex
		failures     []string
		wg           sync.WaitGroup
	)
	// Two clients: the deployment's two instances during the rollout each take one
	// request at a time (max_concurrent_requests_per_instance = 1), so more would be 429s
	// by design, not failures of the rollout.
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				status, rows, err := invokeOnce(uri, key)
				if rows >= 0 && rows < len(byRows) {
					byRows[rows].Add(1)
				}
				if err != nil || status != http.StatusOK {
					failed.Add(1)
					mu.Lock()
					if len(failures) < 5 {
						failures = append(failures, fmt.Sprintf("status %d, error %v", status, err))
					}
					mu.Unlock()
				}
			}
		}()
	}
	u.mustTerraformIn(dir, "apply", "-auto-approve", "-var", "model_job="+job2)
	// The load goes on until the new model has answered (the apply returns once it serves).
	for deadline := time.Now().Add(30 * time.Second); byRows[10].Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 || byRows[8].Load() == 0 || byRows[10].Load() == 0 {
		t.Fatalf("%d of %d requests across the rollout failed (want 0), %d answered by the first model and %d by "+
			"the retrained one (want some of each); the first failures: %v",
			failed.Load(), sent.Load(), byRows[8].Load(), byRows[10].Load(), failures)
	}
	t.Logf("%d requests across the rollout, none failed: %d by the first model, %d by the retrained one",
		sent.Load(), byRows[8].Load(), byRows[10].Load())
	if got := u.mustTerraformIn(dir, "output", "-raw", "model_digest"); got != out2.Digest {
		t.Fatalf("model_digest after the rollout is %q; want %q", got, out2.Digest)
	}
	raw, code = u.cli("endpoint", "invoke", "--workspace", "mlops", "churn", "--data", `{"data": [[0.5, 4, 1.0]]}`)
	if code != 0 {
		t.Fatalf("endpoint invoke after the rollout: exit %d: %s", code, raw)
	}
	if got := served(raw); !got.equal(model2) {
		t.Fatalf("after the rollout the endpoint serves %+v; want the retrained model %+v", got, model2)
	}
	if out, code := u.terraformIn(dir, "plan", "-detailed-exitcode", "-var", "model_job="+job2); code != 0 {
		t.Fatalf("plan after the rollout: exit %d (want 0, no changes):\n%s", code, out)
	}
	u.mustTerraformIn(dir, "destroy", "-auto-approve", "-var", "model_job="+job2)
}

// modelFile is the model.json examples/train-and-serve's job writes.
type modelFile struct {
	Weights   []float64 `json:"weights"`
	Bias      float64   `json:"bias"`
	Epochs    int       `json:"epochs"`
	TrainedOn struct {
		Rows   int    `json:"rows"`
		SHA256 string `json:"sha256"`
	} `json:"trained_on"`
}

func (m modelFile) equal(o modelFile) bool {
	a, _ := json.Marshal(m)
	b, _ := json.Marshal(o)
	return string(a) == string(b)
}

// invokeOnce scores one row at uri with key and returns the status and the number of rows
// the serving model was trained on (-1 without an answer).
func invokeOnce(uri, key string) (status, rows int, err error) {
	req, err := http.NewRequest(http.MethodPost, uri, strings.NewReader(`{"data": [[0.5, 4, 1.0]]}`))
	if err != nil {
		return 0, -1, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := scoringClient.Do(req)
	if err != nil {
		return 0, -1, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return res.StatusCode, -1, fmt.Errorf("%s (%v)", body, err)
	}
	var answer struct {
		Model modelFile `json:"model"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return res.StatusCode, -1, fmt.Errorf("answer %s: %v", body, err)
	}
	return res.StatusCode, answer.Model.TrainedOn.Rows, nil
}
