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
type Queue[K comparable] struct {
	clk     clock.Clock
	fire    func(keys []K)
	compare func(a, b K) int
	// manual: no goroutine and no timer; the owner calls FireDue (deterministic tests).
	manual bool

	mu    sync.Mutex
	heap  []*entry[K]
	index map[K]*entry[K]
	// timer is only Stopped and Reset under mu. armed reports whether it is set for
	// armedFor, the earliest deadline at the time it was armed.
	timer    clock.Timer
	passive  clock.PassiveClock
	armed    bool
	armedFor time.Time
	stopped  bool

	wake     chan struct{} // buffered(1): something is due now
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

type entry[K comparable] struct {
	key      K
	deadline time.Time
	pos      int // position in heap
}

// New starts a queue. fire is called from a single goroutine, never concurrently, with every
// key whose deadline has passed (deadline <= clk.Now()), in deadline order (keys with the
// same deadline in key order); a fired key is no longer in the queue. fire may call Set and
// Remove. Call Stop to end the queue's goroutine.
//
// compare orders keys that share a deadline (fire order is deterministic).
func New[K comparable](clk clock.Clock, compare func(a, b K) int, fire func(keys []K)) *Queue[K] {
	q := newQueue(clk, compare, fire)
	// One timer for the queue's whole life, created stopped; its channel never changes.
	q.timer = clk.NewTimer(time.Hour)
	q.stopTimerLocked()
	go q.run()
	return q
}

// NewManual returns a queue without a goroutine or a timer: nothing fires until the owner
// calls FireDue. A simulation drives it step by step with a fake clock, so every run of a
// seed fires the same keys in the same order.
func NewManual[K comparable](clk clock.PassiveClock, compare func(a, b K) int, fire func(keys []K)) *Queue[K] {
	q := newQueue(clock.Clock(nil), compare, fire)
	q.passive, q.manual = clk, true
	close(q.done)
	return q
}

// FireDue fires, in the caller's goroutine, every key due now; it reports whether any was.
func (q *Queue[K]) FireDue() bool {
	keys := q.popDue()
	if len(keys) > 0 {
		q.fire(keys)
	}
	return len(keys) > 0
}

func newQueue[K comparable](clk clock.Clock, compare func(a, b K) int, fire func(keys []K)) *Queue[K] {
	q := &Queue[K]{
		clk:     clk,
		passive: clk,
		fire:    fire,
		compare: compare,
		index:   make(map[K]*entry[K]),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	return q
}

// Set adds key with deadline, or moves key to deadline when it is already queued. A deadline
// that has already passed fires at once.
func (q *Queue[K]) Set(key K, deadline time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e, ok := q.index[key]; ok {
		if e.deadline.Equal(deadline) {
			return
		}
		e.deadline = deadline
		q.fix(e.pos)
	} else {
		e := &entry[K]{key: key, deadline: deadline, pos: len(q.heap)}
		q.heap = append(q.heap, e)
		q.index[key] = e
		q.up(e.pos)
	}
	q.armLocked()
}

// Remove drops key; it does nothing when key is not queued.
func (q *Queue[K]) Remove(key K) {
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
func (q *Queue[K]) Deadline(key K) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e, ok := q.index[key]; ok {
		return e.deadline, true
	}
	return time.Time{}, false
}

// Len returns the number of queued keys.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.heap)
}

// Next returns the earliest deadline, and false when the queue is empty.
func (q *Queue[K]) Next() (time.Time, bool) {
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
func (q *Queue[K]) Stop() {
	q.stopOnce.Do(func() {
		if q.manual {
			return
		}
		q.mu.Lock()
		q.stopped = true
		q.stopTimerLocked()
		q.mu.Unlock()
		close(q.stop)
	})
	<-q.done
}

// run waits for the timer or a wake-up, then fires what is due.
func (q *Queue[K]) run() {
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
func (q *Queue[K]) popDue() []K {
	q.mu.Lock()
	defer q.mu.Unlock()
	// Whatever woke us, the timer is no longer known to be armed: re-arm from scratch.
	// (A wake-up can come from a wall-clock jump, or be stale: both are harmless.)
	q.armed = false
	now := q.passive.Now()
	var keys []K
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
func (q *Queue[K]) armLocked() {
	if q.stopped || q.manual {
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
	d := next.Sub(q.passive.Now())
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
func (q *Queue[K]) stopTimerLocked() {
	if q.timer == nil {
		return
	}
	if !q.timer.Stop() {
		select {
		case <-q.timer.C():
		default:
		}
	}
}

// Heap operations, on q.heap with positions kept in each entry.

func (q *Queue[K]) less(i, j int) bool {
	a, b := q.heap[i], q.heap[j]
	if a.deadline.Equal(b.deadline) {
		return q.compare(a.key, b.key) < 0
	}
	return a.deadline.Before(b.deadline)
}

func (q *Queue[K]) swap(i, j int) {
	q.heap[i], q.heap[j] = q.heap[j], q.heap[i]
	q.heap[i].pos = i
	q.heap[j].pos = j
}

func (q *Queue[K]) up(i int) {
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
func (q *Queue[K]) down(i int) bool {
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

func (q *Queue[K]) fix(i int) {
	if !q.down(i) {
		q.up(i)
	}
}

func (q *Queue[K]) removeAt(i int) {
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
