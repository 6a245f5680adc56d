package serving

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

// snapshots knows the snapshots it maps to directories.
type snapshots map[string]string

func (s snapshots) Put(io.Reader) (string, error) { return "", errors.New("read-only") }
func (s snapshots) IDs() ([]string, error)        { return nil, nil }
func (s snapshots) Path(id string) (string, error) {
	if p, ok := s[id]; ok {
		return p, nil
	}
	return "", errors.New("no such snapshot")
}

func process(modelSnapshot string) model.Process {
	return model.Process{
		Command: []string{"python", "serve.py"}, EnvironmentVariables: map[string]string{"MODE": "fast"},
		SnapshotID: "code", ModelSnapshotID: modelSnapshot,
	}
}

func TestTaskSetsPortCodeAndEnvironmentVariables(t *testing.T) {
	tasks := Tasks{Snapshots: snapshots{"code": "/snap/code"}}
	p := process("")
	task, release, err := tasks.Task(context.Background(), "serve-1", p, 8123)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if task.Key != "serve-1" || task.CodeDir != "/snap/code" || task.Env["PORT"] != "8123" || task.Env["MODE"] != "fast" {
		t.Fatalf("task %+v; want key serve-1, the code snapshot, PORT=8123 and MODE=fast", task)
	}
	if !slices.Equal(task.Command, p.Command) || len(task.Inputs) != 0 {
		t.Fatalf("command %q, inputs %+v; want the deployment's command alone, with no model", task.Command, task.Inputs)
	}
	if _, ok := p.EnvironmentVariables["PORT"]; ok {
		t.Fatal("the deployment's own environment variables were changed")
	}
}

func TestTaskCopiesTheModelAndNamesItInAzuremlModelDir(t *testing.T) {
	tasks := Tasks{Snapshots: snapshots{"code": "/snap/code", "weights": "/snap/weights"}}
	task, release, err := tasks.Task(context.Background(), "serve-1", process("weights"), 8123)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if len(task.Inputs) != 1 || task.Inputs[0] != (driver.TaskInput{Src: "/snap/weights", Dest: ModelDir}) {
		t.Fatalf("inputs %+v; want the model snapshot copied to %s", task.Inputs, ModelDir)
	}
	shell := strings.Join(task.Command, " ")
	if !strings.Contains(shell, `AZUREML_MODEL_DIR="$`+driver.WorkDirEnv+`/`+ModelDir+`"`) || !strings.HasSuffix(shell, `exec "$@" sh python serve.py`) {
		t.Fatalf("command %q; want a shell that sets AZUREML_MODEL_DIR and execs the deployment's command", shell)
	}
}

func TestTaskRefusesAModelItCannotFind(t *testing.T) {
	_, release, err := Tasks{Snapshots: snapshots{}}.Task(context.Background(), "serve-1", process("gone"), 8123)
	release()
	if err == nil || !strings.Contains(err.Error(), `model snapshot "gone"`) {
		t.Fatalf("error %v; want one naming the missing model snapshot", err)
	}
	_, release, err = Tasks{}.Task(context.Background(), "serve-1", model.Process{ModelDigest: "sha256:abc"}, 8123)
	release()
	if err == nil || !strings.Contains(err.Error(), "no artifacts store") {
		t.Fatalf("error %v; want one saying the engine keeps no artifacts store", err)
	}
}
