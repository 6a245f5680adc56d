package api

import "time"

// Compute instance states, as Azure Machine Learning names them.
const (
	InstanceCreating    = "Creating"
	InstanceRunning     = "Running"
	InstanceStopping    = "Stopping"
	InstanceStopped     = "Stopped"
	InstanceStarting    = "Starting"
	InstanceResizing    = "Resizing"
	InstanceJobRunning  = "JobRunning"
	InstanceSetupFailed = "SetupFailed"
	InstanceDeleting    = "Deleting"
)

// What started an operation on an instance.
const (
	TriggerUser         = "User"
	TriggerSchedule     = "Schedule"
	TriggerIdleShutdown = "IdleShutdown"
)

// DefaultScheduleTimeZone is a schedule's time_zone when none is given.
const DefaultScheduleTimeZone = "UTC"

// Schedule starts or stops an instance at cron times in a time zone.
type Schedule struct {
	Action string `json:"action"` // Start or Stop
	Cron   string `json:"cron"`   // five fields: minute hour day-of-month month day-of-week
	// TimeZone is an IANA name; "" means DefaultScheduleTimeZone.
	TimeZone string `json:"time_zone,omitempty"`
	// Enabled defaults to true: nil means enabled, so a client that leaves it out does not
	// silently disable the schedule.
	Enabled *bool `json:"enabled,omitempty"`
}

// IsEnabled reports whether the schedule is enabled (the default).
func (s Schedule) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// WithDefaults returns the schedule with its defaults filled in, as the engine stores it and
// reads it back (time_zone "UTC", enabled true), so a plan right after apply is empty.
func (s Schedule) WithDefaults() Schedule {
	if s.TimeZone == "" {
		s.TimeZone = DefaultScheduleTimeZone
	}
	enabled := s.IsEnabled()
	s.Enabled = &enabled
	return s
}

// DefaultSetupScriptTimeout is a setup script's timeout when none is given.
const DefaultSetupScriptTimeout = "PT5M"

// SetupScript is a shell script run on an instance's node.
type SetupScript struct {
	Inline  string `json:"inline"`
	Timeout string `json:"timeout,omitempty"` // ISO 8601, default PT5M
}

// SetupScripts run at creation (once) and at every start.
type SetupScripts struct {
	CreationScript *SetupScript `json:"creation_script,omitempty"`
	StartupScript  *SetupScript `json:"startup_script,omitempty"`
}

// Operation is the last operation on an instance.
type Operation struct {
	Name    string    `json:"name"`    // Create, Start, Stop, Restart, Resize
	Status  string    `json:"status"`  // InProgress, Succeeded, Failed
	Trigger string    `json:"trigger"` // User, Schedule, IdleShutdown
	Time    time.Time `json:"time"`
}

// InstanceSettings are the instance-only fields of ComputeSpec, ComputeUpdate and Compute.
type InstanceSettings struct {
	// IdleTimeBeforeShutdown is ISO 8601; "" means never.
	IdleTimeBeforeShutdown string        `json:"idle_time_before_shutdown,omitempty"`
	Schedules              []Schedule    `json:"schedules,omitempty"`
	SetupScripts           *SetupScripts `json:"setup_scripts,omitempty"`
}

// Instance actions for POST .../computes/{compute}/{action}.
const (
	ActionStart   = "start"
	ActionStop    = "stop"
	ActionRestart = "restart"
)
