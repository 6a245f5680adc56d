package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// This file holds what the instance's create and update do after the engine has taken the
// request: waiting until the instance has settled (the engine starts it, runs its setup
// scripts or resizes it on its own goroutines), reporting a failed setup script, and
// turning the engine's "instance." field paths into the schema's attribute paths.

// Polling bounds of waitForInstance: the first poll comes soon, later ones back off.
const (
	instancePollFirst = 100 * time.Millisecond
	instancePollMax   = 250 * time.Millisecond
)

// waitForInstance polls the engine until the instance has settled (instanceSettled) and
// returns it. When ctx ends or a read fails first, it returns the last compute it read
// with the error, so the caller can still record the instance in state.
func (r *computeInstanceResource) waitForInstance(ctx context.Context, workspace, name string, c *api.Compute) (*api.Compute, error) {
	delay := instancePollFirst
	for !instanceSettled(c) {
		tflog.Trace(ctx, "waiting for compute instance", map[string]any{"compute": c.ID, "state": c.State})
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return c, ctx.Err()
		case <-timer.C:
		}
		delay = min(2*delay, instancePollMax)
		next, err := r.client.GetCompute(ctx, workspace, name)
		if err != nil {
			return c, err
		}
		c = next
	}
	return c, nil
}

// instanceSettled reports whether an instance has finished what it was doing: its state
// is not a transition (Creating, Starting, Stopping, Resizing, Deleting) and its last
// operation is no longer in progress. The second condition covers the moment right after
// an update asked for a resize, before the engine moved the instance to Resizing.
func instanceSettled(c *api.Compute) bool {
	switch c.State {
	case api.InstanceCreating, api.InstanceStarting, api.InstanceStopping, api.InstanceResizing, api.InstanceDeleting:
		return false
	}
	return c.LastOperation == nil || c.LastOperation.Status != operationInProgress
}

// operationInProgress is the status of an operation the engine has not finished.
const operationInProgress = "InProgress"

// addSetupFailedError adds the error for an instance whose setup script failed: cause,
// fix, and the engine's account of it (the script, how it ended, where its output is and
// its last lines).
func addSetupFailedError(diags *diag.Diagnostics, c *api.Compute, cause, fix string) {
	diags.AddAttributeError(path.Root("setup_scripts"), "Compute Instance Setup Failed",
		fmt.Sprintf("%s\n\n%s\n\nCompute instance %s: %s", cause, fix, c.ID, c.Error))
}

// instanceFieldError returns err with the field of an engine error made relative to this
// resource's schema: the engine names an instance's settings "instance.schedules.0.cron",
// which the schema has at the top level, schedules[0].cron.
func instanceFieldError(err error) error {
	const prefix = "instance."
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || !strings.HasPrefix(apiErr.Field, prefix) {
		return err
	}
	e := *apiErr
	e.Field = strings.TrimPrefix(e.Field, prefix)
	return &e
}
