package model

import (
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// Instance is the instance part of a compute record.
type Instance struct {
	Settings      api.InstanceSettings `json:"settings"`
	Desired       string               `json:"desired"` // Running or Stopped
	State         string               `json:"state"`
	LastOperation api.Operation        `json:"last_operation"`
	LastActivity  time.Time            `json:"last_activity"`
	// SchedulesSeen: firings at or before it are applied (or predate the schedule).
	SchedulesSeen time.Time `json:"schedules_seen"`
	CreationDone  bool      `json:"creation_done,omitempty"`
	// StartSeq counts starts; setup task keys carry it so a stale exit is recognised.
	StartSeq     int       `json:"start_seq"`
	Stage        string    `json:"stage,omitempty"`
	StageRunning bool      `json:"stage_running,omitempty"`
	StageDue     time.Time `json:"stage_due,omitempty"` // the running script's timeout
	Error        string    `json:"error,omitempty"`
	Resizing     bool      `json:"resizing,omitempty"`
}
