package api

import "time"

// CollectionSchedules is the collection name of schedules in their IDs.
const CollectionSchedules = "schedules"

// Trigger types, recurrence frequencies, overlap and catch-up policies, as the API and
// the provider's schema spell them (rules/trigger reads them).
const (
	TriggerCron       = "cron"
	TriggerRecurrence = "recurrence"

	FrequencyMinute = "minute"
	FrequencyHour   = "hour"
	FrequencyDay    = "day"
	FrequencyWeek   = "week"
	FrequencyMonth  = "month"

	OverlapAllow   = "allow"
	OverlapForbid  = "forbid"
	OverlapReplace = "replace"

	CatchUpNone   = "none"
	CatchUpLatest = "latest"
)

// TriggerTypes, Frequencies, Overlaps, CatchUps and WeekDays list the allowed values, for
// validators and docs.
var (
	TriggerTypes = []string{TriggerCron, TriggerRecurrence}
	Frequencies  = []string{FrequencyMinute, FrequencyHour, FrequencyDay, FrequencyWeek, FrequencyMonth}
	Overlaps     = []string{OverlapAllow, OverlapForbid, OverlapReplace}
	CatchUps     = []string{CatchUpNone, CatchUpLatest}
	WeekDays     = []string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
)

// JobScheduleTrigger is when a schedule starts a job (rules/trigger): a cron expression or a
// recurrence, within StartTime and EndTime, in TimeZone.
type JobScheduleTrigger struct {
	// Type is "cron" or "recurrence".
	Type string `json:"type"`
	// Expression is a five-field cron expression (type cron).
	Expression string `json:"expression,omitempty"`
	// Frequency is minute, hour, day, week or month, and Interval how many of them
	// between ticks (type recurrence).
	Frequency string `json:"frequency,omitempty"`
	Interval  int    `json:"interval,omitempty"`
	// Schedule narrows a day, week or month recurrence to hours, minutes and week days.
	Schedule *RecurrenceSchedule `json:"schedule,omitempty"`
	// StartTime and EndTime bound the ticks (RFC 3339; empty: unbounded).
	StartTime string `json:"start_time,omitempty"`
	EndTime   string `json:"end_time,omitempty"`
	// TimeZone is an IANA or Windows time zone name; empty is UTC.
	TimeZone string `json:"time_zone,omitempty"`
}

// RecurrenceSchedule is a recurrence's hours, minutes and week days.
type RecurrenceSchedule struct {
	Hours    []int    `json:"hours,omitempty"`
	Minutes  []int    `json:"minutes,omitempty"`
	WeekDays []string `json:"week_days,omitempty"`
}

// JobScheduleSpec is what a user declares for a schedule (mlcompute_schedule).
type JobScheduleSpec struct {
	Name    string             `json:"name"`
	Trigger JobScheduleTrigger `json:"trigger"`
	// CreateJob is the YAML of the command or pipeline job each tick submits, as the user
	// wrote it; Job is its submission (code and local inputs uploaded as snapshots), what
	// each tick submits, named <schedule>-YYYYMMDDThhmmssZ.
	CreateJob string  `json:"create_job"`
	Job       JobSpec `json:"job"`
	// ContentHash is the client's hash of CreateJob and the snapshots it uploaded, and
	// BasePath the directory it resolved CreateJob's relative paths from; the engine keeps
	// both as given.
	ContentHash string `json:"content_hash,omitempty"`
	BasePath    string `json:"base_path,omitempty"`
	// Enabled is true by default.
	Enabled *bool `json:"enabled,omitempty"`
	// Overlap is allow, forbid (default) or replace; CatchUp none or latest (default).
	Overlap string `json:"overlap,omitempty"`
	CatchUp string `json:"catch_up,omitempty"`
}

// JobScheduleUpdate replaces everything of a schedule but its name.
type JobScheduleUpdate struct {
	Trigger     JobScheduleTrigger `json:"trigger"`
	CreateJob   string             `json:"create_job"`
	Job         JobSpec            `json:"job"`
	ContentHash string             `json:"content_hash,omitempty"`
	BasePath    string             `json:"base_path,omitempty"`
	Enabled     *bool              `json:"enabled,omitempty"`
	Overlap     string             `json:"overlap,omitempty"`
	CatchUp     string             `json:"catch_up,omitempty"`
}

// JobSchedule is a schedule (mlcompute_schedule) as the engine holds it.
type JobSchedule struct {
	JobScheduleSpec
	ID        string `json:"id"`
	Workspace string `json:"workspace"`
	// NextRunTime is the next tick (UTC), absent when none is left or the schedule is
	// disabled.
	NextRunTime *time.Time `json:"next_run_time,omitempty"`
	// LastRunJob is the job the last tick started, LastRunStatus its status as of now.
	LastRunJob    string `json:"last_run_job,omitempty"`
	LastRunStatus string `json:"last_run_status,omitempty"`
	// LastSkip is the last tick that started nothing, and why (overlap forbid, or a
	// submission the engine refused).
	LastSkip  *ScheduleSkip `json:"last_skip,omitempty"`
	CreatedOn time.Time     `json:"created_on"`
	UpdatedOn time.Time     `json:"updated_on"`
}

// ScheduleSkip is a tick that started no job.
type ScheduleSkip struct {
	Tick   time.Time `json:"tick"`
	Reason string    `json:"reason"`
}

// JobScheduleList is the body of GET /v1/workspaces/{ws}/schedules.
type JobScheduleList struct {
	Schedules []JobSchedule `json:"schedules"`
}

// ScheduleID is the ID of a schedule.
func ScheduleID(workspace, name string) string {
	return ID{Workspace: workspace, Collection: CollectionSchedules, Name: name}.String()
}
