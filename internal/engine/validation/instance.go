package validation

import (
	"fmt"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // time zones load on machines without /usr/share/zoneinfo

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/schedule"
)

// Bounds of a compute instance's idle_time_before_shutdown.
const (
	// MinIdleTimeBeforeShutdown is the plan-time lower bound (PT1S); the engine's policy
	// minimum is higher.
	MinIdleTimeBeforeShutdown = time.Second
	// MaxIdleTimeBeforeShutdown is the plan-time upper bound (P3D).
	MaxIdleTimeBeforeShutdown = 3 * 24 * time.Hour
	// DefaultMinIdleTimeBeforeShutdown is the engine policy's minimum (PT15M, as in Azure)
	// unless the operator lowers it with 'mlcompute serve --min-idle-shutdown'.
	DefaultMinIdleTimeBeforeShutdown = 15 * time.Minute
)

// IdleTimeBeforeShutdown checks an idle_time_before_shutdown value and returns it. "" (null)
// means never and returns 0. Otherwise the value is an ISO 8601 duration from PT1S to P3D,
// and at least policyMin, the engine's minimum; 0 skips that check. The engine passes its
// policy on every create and update, and the provider at plan time, from the engine's
// status.
func IdleTimeBeforeShutdown(s string, policyMin time.Duration) (time.Duration, error) {
	const field = "idle_time_before_shutdown"
	if s == "" {
		return 0, nil
	}
	d, err := Duration(field, s, MinIdleTimeBeforeShutdown, MaxIdleTimeBeforeShutdown)
	if err != nil {
		if zero, zerr := Duration(field, s, 0, 0); zerr == nil && zero == 0 {
			return 0, api.Errorf(api.CodeInvalid, field, "%s %q would shut the instance down at once; leave %s unset (null) to never shut down", field, s, field)
		}
		return 0, err
	}
	if policyMin > 0 && d < policyMin {
		return 0, api.Errorf(api.CodeInvalid, field, "%s %q is below this engine's minimum of %s (set by 'mlcompute serve --min-idle-shutdown')", field, s, FormatDuration(policyMin))
	}
	return d, nil
}

// Schedule is one entry of a compute instance's schedules (a wire type).
type Schedule = api.Schedule

// DefaultScheduleTimeZone is a schedule's time_zone when none is given.
const DefaultScheduleTimeZone = api.DefaultScheduleTimeZone

// MaxSchedules is the largest number of schedules an instance may have.
const MaxSchedules = 4

// ScheduleActions lists the allowed schedule actions.
var ScheduleActions = []string{schedule.ActionStart, schedule.ActionStop}

// CronExample is the example cron expression messages show.
const CronExample = "0 18 * * 1-5"

// Schedules checks an instance's schedules: at most MaxSchedules; each with an allowed
// action, a standard five-field cron expression that matches some date, and an IANA time
// zone. The first problem found is returned, with the path of the input at fault
// ("schedules.1.cron").
func Schedules(list []Schedule) error {
	if len(list) > MaxSchedules {
		return api.Errorf(api.CodeInvalid, "schedules", "schedules has %d entries; at most %d are allowed", len(list), MaxSchedules)
	}
	for i, s := range list {
		if err := scheduleEntry(fmt.Sprintf("schedules.%d", i), s); err != nil {
			return err
		}
	}
	return nil
}

func scheduleEntry(prefix string, s Schedule) error {
	if !slices.Contains(ScheduleActions, s.Action) {
		field := prefix + ".action"
		return api.Errorf(api.CodeInvalid, field, "%s %q is not allowed; allowed values: %s", field, s.Action, strings.Join(ScheduleActions, ", "))
	}
	if _, err := schedule.ParseCron(s.Cron); err != nil {
		field := prefix + ".cron"
		return api.Errorf(api.CodeInvalid, field, "%s %q is not a valid cron expression: %s; expected five fields %q, e.g. %q", field, s.Cron, err, schedule.CronForm, CronExample)
	}
	if _, err := schedule.LoadLocation(s.TimeZone); err != nil {
		field := prefix + ".time_zone"
		return api.Errorf(api.CodeInvalid, field, "%s %q is not a valid IANA time zone name (%v); use a name such as UTC, Europe/Berlin or America/New_York", field, s.TimeZone, err)
	}
	return nil
}
