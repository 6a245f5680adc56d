package backoff

import (
	"testing"
	"time"
)

func TestNextDoublesFromFirstUpToMax(t *testing.T) {
	var got []time.Duration
	prev := time.Duration(0)
	for range 9 {
		prev = Next(prev, 5*time.Second, 0)
		got = append(got, prev)
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, Max, Max, Max}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("wait %d = %v, want %v (all: %v)", i+1, got[i], want[i], got)
		}
	}
}

func TestNextKeepsAPermanentRefusalAtLeastTheFloor(t *testing.T) {
	cases := []struct {
		prev, want time.Duration
	}{
		{0, time.Minute},                // the first refusal
		{time.Minute, 2 * time.Minute},  // doubling goes on above the floor
		{4 * time.Minute, Max},          // capped
		{10 * time.Second, time.Minute}, // after retryable failures
	}
	for _, c := range cases {
		if got := Next(c.prev, 5*time.Second, time.Minute); got != c.want {
			t.Errorf("Next(%v, 5s, 1m) = %v, want %v", c.prev, got, c.want)
		}
	}
}

func TestAfterCountsFailuresInARow(t *testing.T) {
	cases := []struct {
		failures int64
		want     time.Duration
	}{
		{0, time.Second},
		{1, 2 * time.Second},
		{2, 4 * time.Second},
		{8, 256 * time.Second},
		{9, Max},
		{1000, Max},
	}
	for _, c := range cases {
		if got := After(c.failures, time.Second); got != c.want {
			t.Errorf("After(%d, 1s) = %v, want %v", c.failures, got, c.want)
		}
	}
}
