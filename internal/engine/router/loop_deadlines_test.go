package router

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestDeadlinesExpireInOrderAndOnlyOnce(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	clk := clocktesting.NewFakeClock(start)
	fired := 0
	d := deadlines{clock: clk, fire: func() { fired++ }}
	exchange := func(at time.Duration) *loopExchange { return &loopExchange{start: start.Add(at)} }

	slow1, fast, slow2, gone := exchange(0), exchange(time.Second), exchange(2*time.Second), exchange(3*time.Second)
	d.add(slow1, 10*time.Second) // ends at 10 s
	d.add(fast, 2*time.Second)   // ends at 3 s: the timer moves earlier
	d.add(slow2, 10*time.Second) // ends at 12 s
	d.add(gone, 2*time.Second)   // ends at 5 s, but finishes first
	d.remove(gone)
	d.remove(gone) // twice is harmless

	clk.Step(2999 * time.Millisecond)
	if fired != 0 || len(d.expired()) != 0 {
		t.Fatalf("before 3 s: fired %d times, want no expiry", fired)
	}
	clk.Step(time.Millisecond)
	if fired != 1 {
		t.Fatalf("at 3 s the timer fired %d times, want 1", fired)
	}
	if got := d.expired(); len(got) != 1 || got[0] != fast {
		t.Fatalf("at 3 s expired %v, want the fast request", got)
	}
	clk.Step(2 * time.Second) // 5 s: gone was removed, the timer is armed for 10 s
	if fired != 1 {
		t.Fatalf("at 5 s the timer fired %d times, want still 1", fired)
	}
	clk.Step(7 * time.Second) // 12 s
	got := d.expired()
	if fired != 2 || len(got) != 2 || got[0] != slow1 || got[1] != slow2 {
		t.Fatalf("at 12 s: fired %d, expired %v, want both slow requests in order", fired, got)
	}
	if d.armedAt != (time.Time{}) || len(d.queues) != 0 {
		t.Fatalf("nothing left, yet armed for %v with %d queues", d.armedAt, len(d.queues))
	}
	clk.Step(time.Hour)
	if fired != 2 {
		t.Fatalf("the timer fired again with nothing queued")
	}
}
