package router

import (
	"time"

	"k8s.io/utils/clock"
)

// deadlines are one loop's request timeouts. A timer per request would cost each request
// its allocations and two operations on the runtime's timer heap; here each loop keeps
// its exchanges in flight in one queue per timeout length (added in the order they start,
// so each queue is in deadline order) and one timer, armed for the earliest deadline
// when it is not armed earlier. A request that ends is unlinked, and the timer is left
// as it is: firing for a request that already ended costs one look at the queues' heads.
// Everything but fire runs on the loop; fire runs on the timer's goroutine and must get
// expired called on the loop.
type deadlines struct {
	clock   clock.WithDelayedExecution
	fire    func()
	queues  map[time.Duration]*deadlineQueue
	timer   clock.Timer
	armedAt time.Time // when the timer fires; zero when it is not armed
}

// deadlineQueue links the exchanges of one timeout length, the earliest deadline first.
type deadlineQueue struct{ head, tail *loopExchange }

// add queues x, which ends after timeout from its start.
func (d *deadlines) add(x *loopExchange, timeout time.Duration) {
	if d.queues == nil {
		d.queues = map[time.Duration]*deadlineQueue{}
	}
	q := d.queues[timeout]
	if q == nil {
		q = &deadlineQueue{}
		d.queues[timeout] = q
	}
	x.deadline, x.queue = x.start.Add(timeout), q
	x.prev, x.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = x
	} else {
		q.head = x
	}
	q.tail = x
	if d.armedAt.IsZero() || x.deadline.Before(d.armedAt) {
		d.arm(x.deadline)
	}
}

// remove unlinks x; it does nothing for an exchange not queued.
func (d *deadlines) remove(x *loopExchange) {
	q := x.queue
	if q == nil {
		return
	}
	if x.prev != nil {
		x.prev.next = x.next
	} else {
		q.head = x.next
	}
	if x.next != nil {
		x.next.prev = x.prev
	} else {
		q.tail = x.prev
	}
	x.prev, x.next, x.queue = nil, nil, nil
}

// expired unlinks and returns the exchanges whose deadline has passed, and arms the
// timer for the earliest one left.
func (d *deadlines) expired() []*loopExchange {
	now := d.clock.Now()
	var out []*loopExchange
	var next time.Time
	for timeout, q := range d.queues {
		for q.head != nil && !q.head.deadline.After(now) {
			x := q.head
			d.remove(x)
			out = append(out, x)
		}
		if q.head == nil {
			delete(d.queues, timeout)
			continue
		}
		if next.IsZero() || q.head.deadline.Before(next) {
			next = q.head.deadline
		}
	}
	d.armedAt = time.Time{}
	if !next.IsZero() {
		d.arm(next)
	}
	return out
}

func (d *deadlines) arm(at time.Time) {
	// A new timer each time, about once per timeout length: Reset of a timer that has
	// fired is where clock implementations differ (the fake clock's blocks).
	d.stop()
	d.timer = d.clock.AfterFunc(max(at.Sub(d.clock.Now()), 0), d.fire)
	d.armedAt = at
}

// stop stops the timer.
func (d *deadlines) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}
