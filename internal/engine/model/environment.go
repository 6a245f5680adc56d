package model

import (
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Environment is an environment as stored, keyed "<workspace>/<name>".
type Environment struct {
	api.Environment
}

func (e Environment) Key() string { return e.Workspace + "/" + e.Name }

// Definition is the environment's normalised definition.
func (e Environment) Definition() environment.Definition {
	return environment.Normalise(e.Python, e.UserManaged, e.Container)
}

// JobEnvironment is what a job keeps of its environment: its name, content hash and
// normalised definition, as they were when the job was submitted.
type JobEnvironment struct {
	Name       string                 `json:"name"`
	Hash       string                 `json:"hash"`
	Definition environment.Definition `json:"definition"`
}

// GetEnvironment returns an environment or a not_found error.
func GetEnvironment(tx *store.Tx, workspace, name string) (Environment, error) {
	var e Environment
	ok, err := tx.Get(store.Environments, workspace+"/"+name, &e)
	if err != nil {
		return e, err
	}
	if !ok {
		return e, NotFoundEnvironment(workspace, name)
	}
	return e, nil
}

func NotFoundEnvironment(workspace, name string) error {
	return api.Errorf(api.CodeNotFound, "environment", "environment %q not found in workspace %q; create it with an mlcompute_environment resource", name, workspace)
}
