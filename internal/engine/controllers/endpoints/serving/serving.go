// Package serving makes the task that serves a deployment on one of its instances' nodes:
// the deployment's command with PORT set, prepared in its environment (or run in its
// container image), with its code, and with its model copied in and named by
// AZUREML_MODEL_DIR. The endpoints controller starts it; nothing here talks to a node.
package serving

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/envprep"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

// ModelDir is the directory of an instance's working directory that holds its
// deployment's model; AZUREML_MODEL_DIR names it (as an absolute path on the node).
const ModelDir = "model"

// Tasks makes serving tasks from the engine's stores.
type Tasks struct {
	Snapshots model.SnapshotStore
	// Artifacts is the store of job outputs, which deployments' models can be; nil
	// refuses such a model.
	Artifacts *artifacts.Store
	// EnvCache is the environment cache every local node of this machine shares; empty
	// when nodes keep their own.
	EnvCache string
}

// Task is the task of process p listening on port, under key. release ends the staging
// of a model that is a job's output: call it once the driver's StartTask returned (the
// driver copies the model before the command starts).
func (t Tasks) Task(ctx context.Context, key string, p model.Process, port int) (task driver.TaskSpec, release func(), err error) {
	env := maps.Clone(p.EnvironmentVariables)
	if env == nil {
		env = map[string]string{}
	}
	env["PORT"] = strconv.Itoa(port)
	codeDir := ""
	if p.SnapshotID != "" && t.Snapshots != nil {
		codeDir, _ = t.Snapshots.Path(p.SnapshotID)
	}
	task = driver.TaskSpec{Key: key, Command: t.command(p, env), Env: env, CodeDir: codeDir}
	if p.Env != nil {
		if task.Container, err = t.nodeEnv(p).Container(p.Env.Name, t.Snapshots); err != nil {
			return task, func() {}, err
		}
	}
	release, err = t.withModel(ctx, &task, p)
	return task, release, err
}

// withModel gives the task its deployment's model, when it has one: an input copied to
// ModelDir through the driver's channel (an uploaded snapshot, or a job's output staged
// from the artifacts store until release), and AZUREML_MODEL_DIR, which only the node
// knows as an absolute path, so the command is started by a shell that sets it from
// MLCOMPUTE_WORK_DIR and then execs it.
func (t Tasks) withModel(ctx context.Context, task *driver.TaskSpec, p model.Process) (release func(), err error) {
	release = func() {}
	var src string
	switch {
	case p.ModelSnapshotID != "":
		if t.Snapshots == nil {
			return release, fmt.Errorf("model snapshot %q: this engine keeps no snapshots", p.ModelSnapshotID)
		}
		if src, err = t.Snapshots.Path(p.ModelSnapshotID); err != nil {
			return release, fmt.Errorf("model snapshot %q: %w", p.ModelSnapshotID, err)
		}
	case p.ModelDigest != "":
		if t.Artifacts == nil {
			return release, fmt.Errorf("model %s: this engine keeps no artifacts store", p.ModelDigest)
		}
		if src, release, err = t.Artifacts.Stage(ctx, p.ModelDigest); err != nil {
			return func() {}, fmt.Errorf("model %s: %w", p.ModelDigest, err)
		}
	default:
		return release, nil
	}
	task.Inputs = append(task.Inputs, driver.TaskInput{Src: src, Dest: ModelDir})
	task.Command = append([]string{"/bin/sh", "-c",
		`AZUREML_MODEL_DIR="$` + driver.WorkDirEnv + `/` + ModelDir + `"; export AZUREML_MODEL_DIR; exec "$@"`, "sh"},
		task.Command...)
	return release, nil
}

// command is the command of the process: with an environment, one process prepares it on
// the node (builds it into the node's cache, or finds it there) and then execs the
// deployment's command with its interpreter first on PATH. The build counts against the
// readiness probe's budget, and a failed build is a failed start whose output is in the
// instance's log.
func (t Tasks) command(p model.Process, env map[string]string) []string {
	if p.Env == nil {
		return p.Command
	}
	return t.nodeEnv(p).PrepareAndRun(p.Command, env)
}

// nodeEnv is the process's environment as its node needs it.
func (t Tasks) nodeEnv(p model.Process) envprep.Env {
	return envprep.Env{Definition: p.Env.Definition, Hash: p.Env.Hash, Cache: t.EnvCache}
}
