package validation

import (
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func TestIdleTimeBeforeShutdown(t *testing.T) {
	const policy = DefaultMinIdleTimeBeforeShutdown
	for _, tc := range []struct {
		in     string
		policy time.Duration
		want   time.Duration
		err    string
	}{
		{"", policy, 0, ""}, // null: never
		{"PT15M", policy, 15 * time.Minute, ""},
		{"PT1H", policy, time.Hour, ""},
		{"P3D", policy, 72 * time.Hour, ""},
		{"P2DT23H59M", policy, 71*time.Hour + 59*time.Minute, ""},
		{"PT5M", policy, 0, `idle_time_before_shutdown "PT5M" is below this engine's minimum of PT15M (set by 'mlcompute serve --min-idle-shutdown')`},
		{"PT14M59S", policy, 0, "below this engine's minimum of PT15M"},
		{"PT5M", time.Minute, 5 * time.Minute, ""}, // operator lowered the minimum
		{"PT30S", time.Minute, 0, "below this engine's minimum of PT1M"},
		{"PT5M", 0, 5 * time.Minute, ""}, // plan time: no policy
		{"PT1S", 0, time.Second, ""},
		{"PT0S", 0, 0, `idle_time_before_shutdown "PT0S" would shut the instance down at once; leave idle_time_before_shutdown unset (null) to never shut down`},
		{"P0D", policy, 0, "leave idle_time_before_shutdown unset (null)"},
		{"PT0.5S", 0, 0, "between PT1S and P3D"},
		{"P3DT1S", 0, 0, "between PT1S and P3D"},
		{"P4D", policy, 0, "between PT1S and P3D"},
		{"P1M", policy, 0, "years or months"},
		{"15m", policy, 0, "not an ISO 8601 duration"},
		{"-PT15M", policy, 0, "not an ISO 8601 duration"},
	} {
		got, err := IdleTimeBeforeShutdown(tc.in, tc.policy)
		if tc.err == "" {
			if err != nil || got != tc.want {
				t.Errorf("IdleTimeBeforeShutdown(%q, %s) = %s, %v; want %s", tc.in, tc.policy, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("IdleTimeBeforeShutdown(%q, %s) error = %v; want it to contain %q", tc.in, tc.policy, err, tc.err)
			continue
		}
		if !api.IsInvalid(err) || api.FieldOf(err) != "idle_time_before_shutdown" {
			t.Errorf("IdleTimeBeforeShutdown(%q): error %v is not invalid on field idle_time_before_shutdown", tc.in, err)
		}
	}
}

func TestSchedules(t *testing.T) {
	stop := Schedule{Action: "Stop", Cron: "0 19 * * *"}
	start := Schedule{Action: "Start", Cron: "0 8 * * 1-5", TimeZone: "Europe/Berlin"}
	with := func(f func(*Schedule)) Schedule { s := stop; f(&s); return s }
	for _, tc := range []struct {
		name  string
		list  []Schedule
		field string // "" means valid
		msg   string
	}{
		{"none", nil, "", ""},
		{"start and stop", []Schedule{start, stop}, "", ""},
		{"four", []Schedule{start, stop, start, stop}, "", ""},
		{"every IANA zone form", []Schedule{with(func(s *Schedule) { s.TimeZone = "America/New_York" }), with(func(s *Schedule) { s.TimeZone = "UTC" }), with(func(s *Schedule) { s.TimeZone = "Asia/Kolkata" })}, "", ""},
		{"disabled", []Schedule{with(func(s *Schedule) { f := false; s.Enabled = &f })}, "", ""},
		{"five", []Schedule{start, stop, start, stop, start}, "schedules", "schedules has 5 entries; at most 4 are allowed"},
		{"lowercase action", []Schedule{stop, with(func(s *Schedule) { s.Action = "stop" })}, "schedules.1.action", `schedules.1.action "stop" is not allowed; allowed values: Start, Stop`},
		{"empty action", []Schedule{with(func(s *Schedule) { s.Action = "" })}, "schedules.0.action", "allowed values: Start, Stop"},
		{"restart action", []Schedule{with(func(s *Schedule) { s.Action = "Restart" })}, "schedules.0.action", "allowed values: Start, Stop"},
		{"four fields", []Schedule{with(func(s *Schedule) { s.Cron = "0 18 * *" })}, "schedules.0.cron", `schedules.0.cron "0 18 * *" is not a valid cron expression: expected exactly 5 fields`},
		{"six fields", []Schedule{with(func(s *Schedule) { s.Cron = "0 0 18 * * 1-5" })}, "schedules.0.cron", `expected five fields "minute hour day-of-month month day-of-week", e.g. "0 18 * * 1-5"`},
		{"hour out of range", []Schedule{with(func(s *Schedule) { s.Cron = "0 24 * * *" })}, "schedules.0.cron", "above maximum"},
		{"empty cron", []Schedule{with(func(s *Schedule) { s.Cron = "" })}, "schedules.0.cron", "empty"},
		{"descriptor", []Schedule{with(func(s *Schedule) { s.Cron = "@daily" })}, "schedules.0.cron", "descriptors"},
		{"time zone prefix", []Schedule{with(func(s *Schedule) { s.Cron = "CRON_TZ=Europe/Berlin 0 18 * * *" })}, "schedules.0.cron", "set time_zone instead"},
		{"no such date", []Schedule{with(func(s *Schedule) { s.Cron = "0 0 30 2 *" })}, "schedules.0.cron", "matches no date"},
		{"unknown zone", []Schedule{stop, stop, with(func(s *Schedule) { s.TimeZone = "Europe/Berlinn" })}, "schedules.2.time_zone", `schedules.2.time_zone "Europe/Berlinn" is not a valid IANA time zone name`},
		{"Local zone", []Schedule{with(func(s *Schedule) { s.TimeZone = "Local" })}, "schedules.0.time_zone", "depends on the machine"},
		{"abbreviation is not IANA", []Schedule{with(func(s *Schedule) { s.TimeZone = "CEST" })}, "schedules.0.time_zone", "Europe/Berlin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Schedules(tc.list)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Schedules = %v; want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Schedules error = %v; want it to contain %q", err, tc.msg)
			}
			if !api.IsInvalid(err) || api.FieldOf(err) != tc.field {
				t.Fatalf("Schedules error %v: code %q field %q; want invalid on %q", err, api.CodeOf(err), api.FieldOf(err), tc.field)
			}
		})
	}
}

func TestScheduleDefaults(t *testing.T) {
	off := false
	for _, tc := range []struct {
		in          Schedule
		wantZone    string
		wantEnabled bool
	}{
		{Schedule{Action: "Stop", Cron: "0 19 * * *"}, "UTC", true},
		{Schedule{Action: "Stop", Cron: "0 19 * * *", TimeZone: "Europe/Berlin", Enabled: &off}, "Europe/Berlin", false},
	} {
		got := tc.in.WithDefaults()
		if got.TimeZone != tc.wantZone || got.Enabled == nil || *got.Enabled != tc.wantEnabled || got.IsEnabled() != tc.wantEnabled {
			t.Errorf("%+v.WithDefaults() = %+v; want time_zone %s enabled %v", tc.in, got, tc.wantZone, tc.wantEnabled)
		}
		if tc.in.IsEnabled() != tc.wantEnabled {
			t.Errorf("%+v.IsEnabled() = %v; want %v", tc.in, tc.in.IsEnabled(), tc.wantEnabled)
		}
	}
	// WithDefaults does not share the caller's pointer.
	s := Schedule{Enabled: &off}
	*s.WithDefaults().Enabled = true
	if off {
		t.Error("WithDefaults wrote through the caller's Enabled pointer")
	}
}
