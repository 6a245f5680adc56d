package model

import (
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Schedule is a schedule as stored, keyed "<workspace>/<name>".
type Schedule struct {
	api.JobSchedule
	// Firing is the tick whose job is being submitted: committed before the submission,
	// cleared after it, so an engine killed in between submits that job (under the same
	// name and idempotency key) and no other.
	Firing *time.Time `json:"firing,omitempty"`
	// LastTick is the last tick acted on (fired or skipped).
	LastTick *time.Time `json:"last_tick,omitempty"`
}

func (s Schedule) Key() string { return s.Workspace + "/" + s.Name }

// GetSchedule returns a schedule or a not_found error.
func GetSchedule(tx *store.Tx, workspace, name string) (Schedule, error) {
	var s Schedule
	ok, err := tx.Get(store.Schedules, workspace+"/"+name, &s)
	if err != nil {
		return s, err
	}
	if !ok {
		return s, api.Errorf(api.CodeNotFound, "schedule", "schedule %q not found in workspace %q; create it with an mlcompute_schedule resource", name, workspace)
	}
	return s, nil
}

// HasEnabledSchedule reports whether any schedule is enabled and has a tick ahead: such a
// schedule keeps the embedded engine up.
func HasEnabledSchedule(tx *store.Tx) (bool, error) {
	all, err := store.List[Schedule](tx, store.Schedules, "")
	for _, s := range all {
		if s.Enabled != nil && *s.Enabled && (s.NextRunTime != nil || s.Firing != nil) {
			return true, err
		}
	}
	return false, err
}
