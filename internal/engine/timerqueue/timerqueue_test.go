package timerqueue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// firing is one call of fire: the fake time it saw and the keys.
type firing struct {
	at   time.Time
	keys []string
}

// harness runs a queue on a fake clock and turns fire calls into a channel. Time moves only
// by Step; the real-time context is a safety net against a hung test, never an assertion.
type harness struct {
	t     *testing.T
	ctx   context.Context
	clk   *clocktesting.FakeClock
	q     *Queue[string]
	fired chan firing
	probe int
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	h := &harness{t: t, ctx: ctx, clk: clocktesting.NewFakeClock(t0), fired: make(chan firing, 1024)}
	h.q = New(h.clk, strings.Compare, func(keys []string) {
		h.fired <- firing{at: h.clk.Now(), keys: keys}
	})
	t.Cleanup(func() {
		h.q.Stop()
		cancel()
	})
	return h
}

// next waits for the next fire call.
func (h *harness) next() firing {
	h.t.Helper()
	select {
	case f := <-h.fired:
		return f
	case <-h.ctx.Done():
		h.t.Fatalf("no fire call (queue len %d, now %s)", h.q.Len(), h.clk.Now().Sub(t0))
		return firing{}
	}
}

// expect waits for the next fire call and checks its time and keys.
func (h *harness) expect(at time.Time, keys ...string) {
	h.t.Helper()
	f := h.next()
	if !f.at.Equal(at) || !slices.Equal(f.keys, keys) {
		h.t.Fatalf("fired %v at +%s, want %v at +%s", f.keys, f.at.Sub(t0), keys, at.Sub(t0))
	}
}

// quiet proves that nothing else is due: it queues a probe key due now, and the next fire
// call must be that probe alone. Fire calls are ordered, so anything due would show up in it
// or before it.
func (h *harness) quiet() {
	h.t.Helper()
	h.probe++
	key := fmt.Sprintf("~probe-%d", h.probe)
	now := h.clk.Now()
	h.q.Set(key, now)
	h.expect(now, key)
}

func TestFiresAtDeadlineNotBefore(t *testing.T) {
	h := newHarness(t)
	deadline := t0.Add(10 * time.Second)
	h.q.Set("node-1", deadline)

	h.clk.Step(10*time.Second - time.Nanosecond)
	h.quiet()
	if h.q.Len() != 1 {
		t.Fatalf("len = %d before the deadline, want 1", h.q.Len())
	}

	h.clk.Step(time.Nanosecond)
	h.expect(deadline, "node-1")
	if h.q.Len() != 0 {
		t.Fatalf("len = %d after firing, want 0", h.q.Len())
	}
	h.clk.Step(time.Hour)
	h.quiet()
}

func TestPassedDeadlineFiresAtOnce(t *testing.T) {
	h := newHarness(t)
	h.q.Set("late", t0.Add(-time.Minute))
	h.expect(t0, "late")
	h.q.Set("now", t0)
	h.expect(t0, "now")
}

func TestSetMovesKey(t *testing.T) {
	h := newHarness(t)
	h.q.Set("a", t0.Add(10*time.Second))
	h.q.Set("a", t0.Add(20*time.Second)) // later
	if d, ok := h.q.Deadline("a"); !ok || !d.Equal(t0.Add(20*time.Second)) {
		t.Fatalf("Deadline(a) = %v, %v", d, ok)
	}
	h.clk.Step(10 * time.Second)
	h.quiet()
	h.clk.Step(10 * time.Second)
	h.expect(t0.Add(20*time.Second), "a")

	h.q.Set("b", h.clk.Now().Add(time.Hour))
	h.q.Set("b", h.clk.Now().Add(5*time.Second)) // earlier: the timer must move too
	h.clk.Step(5 * time.Second)
	h.expect(t0.Add(25*time.Second), "b")

	// Moving the earliest key behind another one lets the other fire first.
	h.q.Set("c", h.clk.Now().Add(time.Second))
	h.q.Set("d", h.clk.Now().Add(2*time.Second))
	h.q.Set("c", h.clk.Now().Add(3*time.Second))
	h.clk.Step(2 * time.Second)
	h.expect(t0.Add(27*time.Second), "d")
	h.clk.Step(time.Second)
	h.expect(t0.Add(28*time.Second), "c")
}

func TestRemove(t *testing.T) {
	h := newHarness(t)
	h.q.Set("a", t0.Add(time.Second))
	h.q.Set("b", t0.Add(2*time.Second))
	h.q.Set("c", t0.Add(3*time.Second))
	h.q.Remove("a") // the earliest
	h.q.Remove("c")
	h.q.Remove("missing")
	if h.q.Len() != 1 {
		t.Fatalf("len = %d, want 1", h.q.Len())
	}
	if next, ok := h.q.Next(); !ok || !next.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("Next = %v, %v; want +2s", next, ok)
	}
	h.clk.Step(time.Second)
	h.quiet()
	h.clk.Step(time.Hour)
	h.expect(t0.Add(time.Hour+time.Second), "b")

	h.q.Set("gone", h.clk.Now().Add(time.Second))
	h.q.Remove("gone")
	if _, ok := h.q.Next(); ok {
		t.Fatal("Next reports a deadline on an empty queue")
	}
	h.clk.Step(time.Minute)
	h.quiet()
}

func TestSameDeadlineFiresTogether(t *testing.T) {
	h := newHarness(t)
	deadline := t0.Add(time.Minute)
	var want []string
	for i := range 1000 {
		key := fmt.Sprintf("n%04d", i)
		want = append(want, key)
		h.q.Set(key, deadline)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(want), func(i, j int) { want[i], want[j] = want[j], want[i] })
	for _, key := range want { // Set again in another order: no change
		h.q.Set(key, deadline)
	}
	slices.Sort(want)
	h.clk.Step(time.Minute)
	h.expect(deadline, want...)
}

func TestOneStepFiresInDeadlineOrder(t *testing.T) {
	h := newHarness(t)
	h.q.Set("third", t0.Add(3*time.Second))
	h.q.Set("first", t0.Add(1*time.Second))
	h.q.Set("second-b", t0.Add(2*time.Second))
	h.q.Set("second-a", t0.Add(2*time.Second))
	h.q.Set("later", t0.Add(time.Hour))
	h.clk.Step(5 * time.Second)
	h.expect(t0.Add(5*time.Second), "first", "second-a", "second-b", "third")
	if h.q.Len() != 1 {
		t.Fatalf("len = %d, want 1", h.q.Len())
	}
}

func TestFireMaySetAndRemove(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ticks := make(chan time.Time, 16)
	var q *Queue[string]
	q = New(clk, strings.Compare, func(keys []string) {
		for _, k := range keys {
			if k == "repeat" {
				q.Set("repeat", clk.Now().Add(time.Minute)) // re-arm itself
				q.Remove("victim")
				ticks <- clk.Now()
			}
		}
	})
	defer q.Stop()
	q.Set("repeat", t0.Add(time.Minute))
	q.Set("victim", t0.Add(90*time.Second))
	for i := 1; i <= 3; i++ {
		clk.Step(time.Minute)
		select {
		case at := <-ticks:
			if want := t0.Add(time.Duration(i) * time.Minute); !at.Equal(want) {
				t.Fatalf("tick %d at %s, want %s", i, at, want)
			}
		case <-ctx.Done():
			t.Fatalf("tick %d never fired", i)
		}
	}
	if _, ok := q.Deadline("victim"); ok {
		t.Fatal("victim still queued")
	}
}

func TestStop(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	var mu sync.Mutex
	calls := 0
	q := New(clk, strings.Compare, func([]string) { mu.Lock(); calls++; mu.Unlock() })
	q.Set("a", t0.Add(time.Second))
	q.Stop()
	q.Stop() // idempotent
	q.Set("b", t0)
	clk.Step(time.Hour)
	if clk.HasWaiters() {
		t.Fatal("a stopped queue still has a timer armed")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 0 {
		t.Fatalf("fire called %d times after Stop", calls)
	}
}

// TestConcurrentSetRemove moves and removes keys from many goroutines (run with -race), then
// checks that exactly the surviving keys fire, each once.
func TestConcurrentSetRemove(t *testing.T) {
	h := newHarness(t)
	const workers, perWorker = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range perWorker {
				key := fmt.Sprintf("w%d-%d", w, i)
				h.q.Set(key, t0.Add(time.Duration(1+rng.IntN(3600))*time.Second))
				h.q.Set(key, t0.Add(time.Duration(1+rng.IntN(3600))*time.Second))
				if i%2 == 1 {
					h.q.Remove(key)
				}
			}
		}()
	}
	wg.Wait()
	if got, want := h.q.Len(), workers*perWorker/2; got != want {
		t.Fatalf("len = %d, want %d", got, want)
	}
	h.clk.Step(2 * time.Hour)
	f := h.next()
	seen := map[string]bool{}
	for _, k := range f.keys {
		if seen[k] {
			t.Fatalf("%s fired twice", k)
		}
		seen[k] = true
	}
	if len(seen) != workers*perWorker/2 || h.q.Len() != 0 {
		t.Fatalf("fired %d keys, %d left", len(seen), h.q.Len())
	}
	h.quiet()
}

// TestScale100k is the scale rule: 100,000 keys with distinct deadlines spread over 24 hours
// each fire exactly once, exactly at their deadline (zero lateness on a fake clock), and
// never early. The clock steps to every deadline in turn.
func TestScale100k(t *testing.T) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(42, 2025))
	offsets := make(map[time.Duration]bool, n)
	deadlines := make([]time.Time, 0, n)
	for len(deadlines) < n {
		off := time.Duration(1 + rng.Int64N(int64(24*time.Hour)))
		if !offsets[off] {
			offsets[off] = true
			deadlines = append(deadlines, t0.Add(off))
		}
	}
	keyOf := func(i int) string { return fmt.Sprintf("node-%06d", i) }
	idx := make(map[string]int, n)
	for i := range n {
		idx[keyOf(i)] = i
	}

	clk := clocktesting.NewFakeClock(t0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	count := make([]int, n)
	var wrong []string // written only by fire, read after the last fire call
	fired := make(chan struct{}, 1)
	q := New(clk, strings.Compare, func(keys []string) {
		now := clk.Now()
		for _, k := range keys {
			i := idx[k]
			count[i]++
			if !now.Equal(deadlines[i]) {
				wrong = append(wrong, fmt.Sprintf("%s fired at +%s, deadline +%s", k, now.Sub(t0), deadlines[i].Sub(t0)))
			}
		}
		fired <- struct{}{}
	})
	defer q.Stop()

	start := time.Now()
	for _, i := range rng.Perm(n) {
		q.Set(keyOf(i), deadlines[i])
	}
	setTook := time.Since(start)

	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return deadlines[a].Compare(deadlines[b]) })
	for step, i := range order {
		clk.Step(deadlines[i].Sub(clk.Now()))
		select {
		case <-fired:
		case <-ctx.Done():
			t.Fatalf("step %d: %s did not fire at +%s", step, keyOf(i), deadlines[i].Sub(t0))
		}
		if count[i] != 1 {
			t.Fatalf("step %d: %s fired %d times", step, keyOf(i), count[i])
		}
	}
	if q.Len() != 0 {
		t.Fatalf("%d keys left", q.Len())
	}
	if len(wrong) > 0 {
		t.Fatalf("%d keys fired off their deadline, first: %s", len(wrong), wrong[0])
	}
	for i, c := range count {
		if c != 1 {
			t.Fatalf("%s fired %d times", keyOf(i), c)
		}
	}
	t.Logf("%d keys: Set took %s, stepping through every deadline took %s", n, setTook, time.Since(start)-setTook)
}

// TestRealClock checks the same timer logic against the real clock, whose Stop and Reset
// semantics differ from the fake one. It waits for the callback and asserts nothing about
// how long that took.
func TestRealClock(t *testing.T) {
	clk := clock.RealClock{}
	got := make(chan []string, 4)
	q := New(clk, strings.Compare, func(keys []string) { got <- keys })
	defer q.Stop()
	now := clk.Now()
	deadlines := map[string]time.Time{
		"b": now.Add(20 * time.Millisecond), "a": now.Add(10 * time.Millisecond),
		"never": now.Add(time.Hour), "removed": now.Add(5 * time.Millisecond),
	}
	for k, d := range deadlines {
		q.Set(k, d)
	}
	q.Remove("removed")
	var keys []string
	for len(keys) < 2 {
		select {
		case k := <-got:
			for _, key := range k {
				if clk.Now().Before(deadlines[key]) {
					t.Fatalf("%s fired early", key)
				}
			}
			keys = append(keys, k...)
		case <-time.After(30 * time.Second):
			t.Fatalf("fired only %v", keys)
		}
	}
	if !slices.Equal(keys, []string{"a", "b"}) {
		t.Fatalf("fired %v, want [a b]", keys)
	}
}

func BenchmarkSet(b *testing.B) {
	for _, size := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("queued=%d", size), func(b *testing.B) {
			clk := clocktesting.NewFakeClock(t0)
			q := New(clk, strings.Compare, func([]string) {})
			defer q.Stop()
			rng := rand.New(rand.NewPCG(1, 1))
			keys := make([]string, size)
			for i := range keys {
				keys[i] = fmt.Sprintf("node-%d", i)
				q.Set(keys[i], t0.Add(time.Hour+time.Duration(rng.Int64N(int64(24*time.Hour)))))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				// Move an existing key: the steady-state cost of an idle node's deadline.
				q.Set(keys[i%size], t0.Add(time.Hour+time.Duration(rng.Int64N(int64(24*time.Hour)))))
			}
		})
	}
}
