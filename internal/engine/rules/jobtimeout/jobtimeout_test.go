package jobtimeout

import (
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		started *time.Time
		limit   int64
		now     time.Time
		expired bool
		at      time.Time
	}{
		{"no limit", &start, 0, start.Add(100 * time.Hour), false, time.Time{}},
		{"not running", nil, 60, start.Add(time.Hour), false, time.Time{}},
		{"within its limit", &start, 60, start.Add(59 * time.Second), false, start.Add(time.Minute)},
		{"at its limit", &start, 60, start.Add(time.Minute), true, start.Add(time.Minute)},
		{"past its limit", &start, 60, start.Add(time.Hour), true, start.Add(time.Minute)},
		{"a huge limit is bounded", &start, 1 << 62, start.Add(time.Hour), false, start.Add(MaxSeconds * time.Second)},
	}
	for _, tt := range tests {
		d := Decide(tt.started, tt.limit, tt.now)
		if d.Expired != tt.expired || !d.Deadline.Equal(tt.at) {
			t.Errorf("%s: Decide = %+v; want expired %v at %s", tt.name, d, tt.expired, tt.at)
		}
		if d.Expired && d.Reason == "" {
			t.Errorf("%s: expired without a reason", tt.name)
		}
	}
}
