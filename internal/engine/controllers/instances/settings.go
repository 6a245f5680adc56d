package instances

import (
	"fmt"
	"strconv"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/idle"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/schedule"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// An instance's settings: defaults, validation, an update's effect on the idle clock and
// on schedules, and the rule's view of its schedules.

func normalizeInstance(s *api.InstanceSettings) api.InstanceSettings {
	if s == nil {
		return api.InstanceSettings{}
	}
	out := *s
	out.Schedules = nil
	for _, sc := range s.Schedules {
		out.Schedules = append(out.Schedules, sc.WithDefaults())
	}
	if ss := s.SetupScripts; ss != nil {
		c := *ss
		for _, p := range []**api.SetupScript{&c.CreationScript, &c.StartupScript} {
			if *p != nil {
				script := **p
				if script.Timeout == "" {
					script.Timeout = api.DefaultSetupScriptTimeout
				}
				*p = &script
			}
		}
		out.SetupScripts = &c
	}
	return out
}

// validateInstance checks an instance's settings against the engine's idle policy.
func (c *Controller) validateInstance(s api.InstanceSettings) error {
	if _, err := validation.IdleTimeBeforeShutdown(s.IdleTimeBeforeShutdown, c.minIdleShutdown); err != nil {
		return prefixField(err, "instance.")
	}
	if err := validation.Schedules(s.Schedules); err != nil {
		return prefixField(err, "instance.")
	}
	if ss := s.SetupScripts; ss != nil {
		for name, sc := range map[string]*api.SetupScript{"creation_script": ss.CreationScript, "startup_script": ss.StartupScript} {
			if sc == nil {
				continue
			}
			field := "instance.setup_scripts." + name + ".timeout"
			if _, err := validation.Duration(field, sc.Timeout, time.Second, 24*time.Hour); err != nil {
				return err
			}
		}
	}
	return nil
}

func prefixField(err error, prefix string) error {
	if e, ok := err.(*api.Error); ok && e.Field != "" {
		out := *e
		out.Field = prefix + e.Field
		return &out
	}
	return err
}

// updateInstance applies an update to an instance record, inside the core's write.
func (c *Controller) updateInstance(rec *model.Compute, upd api.ComputeUpdate, now time.Time) error {
	inst := rec.Instance
	if upd.VMSize != "" {
		size, err := validation.VMSize("vm_size", upd.VMSize, catalog.ComputeInstance)
		if err != nil {
			return err
		}
		if size.Name != rec.VMSize {
			rec.VMSize = size.Name
			inst.Resizing = true
			inst.LastOperation = api.Operation{Name: "Resize", Status: "InProgress", Trigger: api.TriggerUser, Time: now}
		}
	}
	if upd.Instance != nil {
		settings := normalizeInstance(upd.Instance)
		if err := c.validateInstance(settings); err != nil {
			return err
		}
		oldIdle := rec.Durations.IdleShutdownAfter
		newIdle, _ := validation.IdleTimeBeforeShutdown(settings.IdleTimeBeforeShutdown, 0)
		inst.LastActivity = idle.OnSettingChange(c.activity(*rec), oldIdle, newIdle, now)
		if fmt.Sprint(settings.Schedules) != fmt.Sprint(inst.Settings.Schedules) {
			inst.SchedulesSeen = now // a new schedule never fires for a time before it existed
		}
		inst.Settings = settings
	}
	return nil
}

// scheduleEntries are an instance's schedules as rules/schedule reads them.
func scheduleEntries(rec model.Compute) []schedule.Entry {
	var out []schedule.Entry
	for i, s := range rec.Instance.Settings.Schedules {
		out = append(out, schedule.Entry{Key: rec.Key() + "/" + strconv.Itoa(i), Action: s.Action, Cron: s.Cron, TimeZone: s.TimeZone, Enabled: s.IsEnabled()})
	}
	return out
}
