package validation

import (
	"errors"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/trigger"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/lazyregexp"
)

// ScheduleName is the naming rule of schedules: a tick's job is named
// <schedule>-YYYYMMDDThhmmssZ, so the name leaves room for the suffix in a job name.
var ScheduleName = NameRule{
	Kind:    "schedule",
	Pattern: lazyregexp.New(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,200}$`),
	Explain: "1 to 201 characters: letters, digits, '-' and '_', starting with a letter or digit",
}

// ScheduleTrigger converts a schedule's trigger to the rule's (rules/trigger) and checks
// it, naming the attribute at fault ("trigger.expression") and the values allowed.
func ScheduleTrigger(t api.JobScheduleTrigger) (trigger.Trigger, error) {
	out := trigger.Trigger{
		Type: t.Type, Expression: t.Expression, Frequency: t.Frequency, Interval: t.Interval, TimeZone: t.TimeZone,
	}
	if s := t.Schedule; s != nil {
		out.Hours, out.Minutes, out.WeekDays = s.Hours, s.Minutes, s.WeekDays
	}
	for _, b := range []struct {
		field, value string
		to           *time.Time
	}{{"trigger.start_time", t.StartTime, &out.Start}, {"trigger.end_time", t.EndTime, &out.End}} {
		if b.value == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, b.value)
		if err != nil {
			return out, api.Errorf(api.CodeInvalid, b.field, "%s %q is not an RFC 3339 time such as 2026-01-01T09:00:00Z", b.field, b.value)
		}
		*b.to = at
	}
	if err := trigger.Validate(out); err != nil {
		var fe *trigger.FieldError
		if errors.As(err, &fe) {
			return out, api.Errorf(api.CodeInvalid, fe.Field, "%s", fe.Error())
		}
		return out, api.Errorf(api.CodeInvalid, "trigger", "%v", err)
	}
	return out, nil
}

// ScheduleOverlap and ScheduleCatchUp check a schedule's overlap and catch_up ("" is the
// default).
func ScheduleOverlap(v string) error { return oneOfOrEmpty("overlap", v, trigger.Overlaps) }
func ScheduleCatchUp(v string) error { return oneOfOrEmpty("catch_up", v, trigger.CatchUps) }

func oneOfOrEmpty(field, v string, allowed []string) error {
	for _, a := range allowed {
		if v == "" || v == a {
			return nil
		}
	}
	return api.Errorf(api.CodeInvalid, field, "%s %q is not one of %s", field, v, strings.Join(allowed, ", "))
}
