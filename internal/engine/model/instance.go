package model

import (
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/instance"
)

// Instance is the instance part of a compute record: its settings and its lifecycle state
// (rules/instance), stored flat as one JSON object.
type Instance struct {
	Settings api.InstanceSettings `json:"settings"`
	instance.Lifecycle
}
