// Package timerqueue keeps deadlines, such as when an idle node becomes releasable, and calls
// back when they pass. It is a min-heap of (deadline, key) behind ONE timer from an injected
// clock, always armed for the earliest deadline, so no deadline is ever found by scanning or
// polling: Set and Remove cost O(log n) and a deadline fires as soon as the clock reaches it,
// at any number of keys.
//
// With a fake clock (k8s.io/utils/clock/testing), a key fires during the Step that reaches
// its deadline, and the fake time seen inside the callback is that Step's time. A test that
// waits for each callback before stepping again therefore sees every key fire exactly at its
// deadline.
package timerqueue

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Queue calls fire with the keys whose deadlines have passed. Every method is safe for
// concurrent use, including from inside fire (except Stop).
type Queue struct {
	clk  clock.Clock
	fire func(keys []string)

	mu    sync.Mutex
	heap  []*entry
	index map[string]*entry
	// timer is only Stopped and Reset under mu. armed reports whether it is set for
	// armedFor, the earliest deadline at the time it was armed.
	timer    clock.Timer
	armed    bool
	armedFor time.Time
	stopped  bool

	wake     chan struct{} // buffered(1): something is due now
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

type entry struct {
	key      string
	deadline time.Time
	pos      int // position in heap
}

// New starts a queue. fire is called from a single goroutine, never concurrently, with every
// key whose deadline has passed (deadline <= clk.Now()), in deadline order (keys with the
// same deadline in key order); a fired key is no longer in the queue. fire may call Set and
// Remove. Call Stop to end the queue's goroutine.
func New(clk clock.Clock, fire func(keys []string)) *Queue {
	q := &Queue{
		clk:   clk,
		fire:  fire,
		index: make(map[string]*entry),
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	// One timer for the queue's whole life, created stopped; its channel never changes.
	q.timer = clk.NewTimer(time.Hour)
	q.stopTimerLocked()
	go q.run()
	return q
}

// Set adds key with deadline, or moves key to deadline when it is already queued. A deadline
// that has already passed fires at once.
func (q *Queue) Set(key string, deadline time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e, ok := q.index[key]; ok {
		if e.deadline.Equal(deadline) {
			return
		}
		e.deadline = deadline
		q.fix(e.pos)
	} else {
		e := &entry{key: key, deadline: deadline, pos: len(q.heap)}
		q.heap = append(q.heap, e)
		q.index[key] = e
		q.up(e.pos)
	}
	q.armLocked()
}

// Remove drops key; it does nothing when key is not queued.
func (q *Queue) Remove(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.index[key]
	if !ok {
		return
	}
	q.removeAt(e.pos)
	q.armLocked()
}

// Deadline returns key's deadline and whether key is queued.
func (q *Queue) Deadline(key string) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e, ok := q.index[key]; ok {
		return e.deadline, true
	}
	return time.Time{}, false
}

// Len returns the number of queued keys.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.heap)
}

// Next returns the earliest deadline, and false when the queue is empty.
func (q *Queue) Next() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.heap) == 0 {
		return time.Time{}, false
	}
	return q.heap[0].deadline, true
}

// Stop stops the timer and the queue's goroutine, and waits for a fire call in progress to
// return; fire is never called after Stop returns. Stop is idempotent. It must not be called
// from fire (it would wait for itself). Keys stay queued but never fire.
func (q *Queue) Stop() {
	q.stopOnce.Do(func() {
		q.mu.Lock()
		q.stopped = true
		q.stopTimerLocked()
		q.mu.Unlock()
		close(q.stop)
	})
	<-q.done
}

// run waits for the timer or a wake-up, then fires what is due.
func (q *Queue) run() {
	defer close(q.done)
	for {
		select {
		case <-q.stop:
			return
		case <-q.wake:
		case <-q.timer.C():
		}
		keys := q.popDue()
		if len(keys) == 0 {
			continue
		}
		select {
		case <-q.stop:
			return
		default:
		}
		q.fire(keys)
	}
}

// popDue removes and returns the keys due now, and re-arms the timer for what is left.
func (q *Queue) popDue() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	// Whatever woke us, the timer is no longer known to be armed: re-arm from scratch.
	// (A wake-up can come from a wall-clock jump, or be stale: both are harmless.)
	q.armed = false
	now := q.clk.Now()
	var keys []string
	for len(q.heap) > 0 && !q.heap[0].deadline.After(now) {
		keys = append(keys, q.heap[0].key)
		q.removeAt(0)
	}
	q.armLocked()
	return keys
}

// armLocked keeps the invariant: the timer is armed for the earliest deadline, or a wake-up
// is pending when that deadline has already passed, or the queue is empty and the timer
// stopped. It reads the clock only when the earliest deadline changed, so Set of a key that
// is not the earliest costs no clock call.
func (q *Queue) armLocked() {
	if q.stopped {
		return
	}
	if len(q.heap) == 0 {
		if q.armed {
			q.stopTimerLocked()
			q.armed = false
		}
		return
	}
	next := q.heap[0].deadline
	if q.armed && q.armedFor.Equal(next) {
		return
	}
	// Stopping may swallow a tick the goroutine has not received yet. That is safe: either
	// the earliest deadline has passed and we wake the goroutine below, or it is still ahead
	// and so nothing is due.
	q.stopTimerLocked()
	d := next.Sub(q.clk.Now())
	if d <= 0 {
		q.armed = false
		select {
		case q.wake <- struct{}{}:
		default:
		}
		return
	}
	q.timer.Reset(d)
	q.armed, q.armedFor = true, next
}

// stopTimerLocked stops the timer and empties its channel, so a later Reset starts clean
// (the fake clock's timers send into a one-slot channel and would block on a full one).
func (q *Queue) stopTimerLocked() {
	if !q.timer.Stop() {
		select {
		case <-q.timer.C():
		default:
		}
	}
}

// Heap operations, on q.heap with positions kept in each entry.

func (q *Queue) less(i, j int) bool {
	a, b := q.heap[i], q.heap[j]
	if a.deadline.Equal(b.deadline) {
		return a.key < b.key
	}
	return a.deadline.Before(b.deadline)
}

func (q *Queue) swap(i, j int) {
	q.heap[i], q.heap[j] = q.heap[j], q.heap[i]
	q.heap[i].pos = i
	q.heap[j].pos = j
}

func (q *Queue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

// down sifts i down and reports whether it moved.
func (q *Queue) down(i int) bool {
	start, n := i, len(q.heap)
	for {
		left := 2*i + 1
		if left >= n {
			break
		}
		child := left
		if right := left + 1; right < n && q.less(right, left) {
			child = right
		}
		if !q.less(child, i) {
			break
		}
		q.swap(i, child)
		i = child
	}
	return i > start
}

func (q *Queue) fix(i int) {
	if !q.down(i) {
		q.up(i)
	}
}

func (q *Queue) removeAt(i int) {
	e := q.heap[i]
	last := len(q.heap) - 1
	if i != last {
		q.swap(i, last)
	}
	q.heap[last] = nil
	q.heap = q.heap[:last]
	if i != last {
		q.fix(i)
	}
	delete(q.index, e.key)
}
