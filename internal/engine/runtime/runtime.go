// Package runtime is the engine's work loop. Controllers never call each other: they mark
// the objects whose state they changed (Mark), set typed timers for the deadlines their
// rules returned (SetTimer), and hand slow work, such as driver calls, to Go. The loop
// reconciles each marked object with the handler registered for its kind, one pass at a
// time, and marks an object again when one of its timers fires.
//
// Two modes share every line of controller code:
//   - Run (the daemon): a goroutine reconciles marked objects, one timer armed on the
//     injected clock fires deadlines, Go starts a goroutine, and driver events are applied
//     as they arrive.
//   - Manual (tests and the simulation): nothing runs by itself. Settle runs, in the
//     caller's goroutine and in a fixed order, every piece of work that is pending (work
//     handed to Go, driver events, due timers, marked objects) until none is left. With a
//     fake clock and a fake driver a test is then deterministic: move the clock, Settle,
//     check, with no sleep and no poll.
package runtime

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/timerqueue"
)

// Kind is the kind of object a key names, and so which handler reconciles it.
type Kind uint8

const (
	// Compute is a compute ("<workspace>/<name>"): cluster, instance or attached machine.
	Compute Kind = iota + 1
	// Endpoint is an online endpoint ("<workspace>/<name>").
	Endpoint
	// EndpointInstance is one process of an endpoint deployment (its instance ID). It has no
	// handler: it only names the object of probe timers.
	EndpointInstance
	// Pipeline is a pipeline job ("<workspace>/<id>").
	Pipeline
	// JobSchedule is an mlcompute_schedule ("<workspace>/<name>").
	JobSchedule
)

func (k Kind) String() string {
	switch k {
	case Compute:
		return "compute"
	case Endpoint:
		return "endpoint"
	case EndpointInstance:
		return "endpoint instance"
	case Pipeline:
		return "pipeline"
	case JobSchedule:
		return "schedule"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Key names one object to reconcile.
type Key struct {
	Kind Kind
	Name string
}

func (k Key) String() string { return k.Kind.String() + " " + k.Name }

// ComputeKey and EndpointKey build keys.
func ComputeKey(name string) Key  { return Key{Kind: Compute, Name: name} }
func EndpointKey(name string) Key { return Key{Kind: Endpoint, Name: name} }

// PipelineKey builds the key of a pipeline job ("<workspace>/<id>").
func PipelineKey(name string) Key { return Key{Kind: Pipeline, Name: name} }

// JobScheduleKey builds the key of a schedule ("<workspace>/<name>").
func JobScheduleKey(name string) Key { return Key{Kind: JobSchedule, Name: name} }

func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
}

// TimerKind says why a deadline was set. An object may have one timer of each kind per Sub.
type TimerKind uint8

const (
	// NodeIdle: an idle cluster node (Sub: node ID) becomes releasable.
	NodeIdle TimerKind = iota + 1
	// Retry: a failed driver call is tried again (Sub: the node or instance ID, or empty for
	// the object's node creation).
	Retry
	// Schedule: an instance's next schedule firing, or a schedule's (JobSchedule) next tick.
	Schedule
	// InstanceIdle: an instance's idle-shutdown deadline.
	InstanceIdle
	// SetupTimeout: an instance's running setup script reaches its timeout.
	SetupTimeout
	// EndpointStep: an endpoint instance (Sub: instance ID) ends its drain or may restart.
	EndpointStep
	// Probe: an endpoint instance's probe is due (Object: the EndpointInstance; Sub: the
	// probe, "ready" or "live"). Its handler runs the probe, not a reconcile.
	Probe
	// JobTimeout: a running job (Sub: its ID) of the compute reaches its limits.timeout.
	JobTimeout
)

// Timer names one deadline.
type Timer struct {
	Kind   TimerKind
	Object Key
	Sub    string
}

// CompareTimers orders timers that share a deadline, so they fire in a fixed order.
func CompareTimers(a, b Timer) int {
	return cmp.Or(compareKeys(a.Object, b.Object), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Sub, b.Sub))
}

// RetryAfter is how long a failed driver call (a node that did not start, a release that
// failed) waits before the next try, so a failing driver is not called in a loop.
const RetryAfter = 5 * time.Second

// Handler reconciles one object: it reads the stored state, calls its rule, commits, and
// then acts (through Go for anything slow).
type Handler func(ctx context.Context, name string)

// Config builds a Loop.
type Config struct {
	Clock clock.WithTicker
	// Manual selects the manual mode (see the package documentation).
	Manual bool
	// Events are the drivers' event channels, applied by OnEvent one event at a time.
	Events  []<-chan driver.Event
	OnEvent func(ctx context.Context, ev driver.Event)
	// OnTimer handles a fired timer; nil marks the timer's object. It runs on the loop.
	OnTimer func(ctx context.Context, t Timer)
}

// Loop is the work loop. Its methods are safe for concurrent use.
type Loop struct {
	cfg      Config
	handlers map[Kind]Handler
	timers   *timerqueue.Queue[Timer]
	ctx      context.Context

	mu      sync.Mutex
	dirty   map[Key]bool
	pending []func() // manual mode: work handed to Go, run by Settle in order
	wake    chan struct{}
	fired   []Timer // timers that fired, applied on the loop goroutine
	waiters map[Key][]chan struct{}
}

// New builds a loop; register handlers, then Run (or Settle in manual mode).
func New(cfg Config) *Loop {
	l := &Loop{
		cfg: cfg, handlers: map[Kind]Handler{}, dirty: map[Key]bool{}, wake: make(chan struct{}, 1),
		ctx: context.Background(), waiters: map[Key][]chan struct{}{},
	}
	if cfg.Manual {
		l.timers = timerqueue.NewManual(cfg.Clock, CompareTimers, l.onFire)
	} else {
		l.timers = timerqueue.New(cfg.Clock, CompareTimers, l.onFire)
	}
	return l
}

// Watch sets the drivers' event channels and what applies their events; call it before Run
// (or the first Settle).
func (l *Loop) Watch(events []<-chan driver.Event, onEvent func(ctx context.Context, ev driver.Event)) {
	l.cfg.Events, l.cfg.OnEvent = events, onEvent
}

// Handle registers the handler of a kind of object.
func (l *Loop) Handle(kind Kind, h Handler) { l.handlers[kind] = h }

// Mark asks for a pass over the object; passes asked for while one is pending merge.
func (l *Loop) Mark(k Key) {
	l.mu.Lock()
	l.dirty[k] = true
	l.mu.Unlock()
	l.poke()
}

func (l *Loop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Go runs slow work (a driver call and what follows it) off the loop: at once in its own
// goroutine, or in manual mode during the next Settle.
func (l *Loop) Go(f func()) {
	if !l.cfg.Manual {
		go f()
		return
	}
	l.mu.Lock()
	l.pending = append(l.pending, f)
	l.mu.Unlock()
}

// SetTimer sets (or moves) a timer; a deadline already passed fires at once.
func (l *Loop) SetTimer(t Timer, at time.Time) { l.timers.Set(t, at) }

// RemoveTimer drops a timer; it does nothing when the timer is not set.
func (l *Loop) RemoveTimer(t Timer) { l.timers.Remove(t) }

// TimerDeadline returns a timer's deadline and whether it is set.
func (l *Loop) TimerDeadline(t Timer) (time.Time, bool) { return l.timers.Deadline(t) }

// NextDeadline returns the earliest timer deadline, and false when no timer is set.
func (l *Loop) NextDeadline() (time.Time, bool) { return l.timers.Next() }

// onFire is the timer queue's callback. In run mode it comes from the queue's goroutine:
// the timers are handed to the loop goroutine, so handlers never run concurrently.
func (l *Loop) onFire(ts []Timer) {
	if l.cfg.Manual {
		l.applyTimers(l.ctx, ts)
		return
	}
	l.mu.Lock()
	l.fired = append(l.fired, ts...)
	l.mu.Unlock()
	l.poke()
}

func (l *Loop) applyTimers(ctx context.Context, ts []Timer) {
	for _, t := range ts {
		if l.cfg.OnTimer != nil {
			l.cfg.OnTimer(ctx, t)
		} else {
			l.Mark(t.Object)
		}
	}
}

// Run reconciles until ctx ends (run mode).
func (l *Loop) Run(ctx context.Context) {
	l.ctx = ctx
	var events sync.Mutex // one event at a time, whichever driver it comes from
	for _, ch := range l.cfg.Events {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-ch:
					events.Lock()
					l.cfg.OnEvent(ctx, ev)
					events.Unlock()
				}
			}
		}()
	}
	go func() {
		<-ctx.Done()
		l.timers.Stop()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		l.mu.Lock()
		fired := l.fired
		l.fired = nil
		l.mu.Unlock()
		l.applyTimers(ctx, fired)
		l.reconcileDirty(ctx)
	}
}

// reconcileDirty runs one pass over every marked object, in key order; it reports whether
// there was any.
func (l *Loop) reconcileDirty(ctx context.Context) bool {
	l.mu.Lock()
	keys := slices.SortedFunc(maps.Keys(l.dirty), compareKeys)
	clear(l.dirty)
	l.mu.Unlock()
	for _, k := range keys {
		if h := l.handlers[k.Kind]; h != nil && ctx.Err() == nil {
			h(ctx, k.Name)
		}
	}
	return len(keys) > 0
}

// Reconcile runs one pass over one object now, in the caller's goroutine (manual mode).
func (l *Loop) Reconcile(ctx context.Context, k Key) {
	if h := l.handlers[k.Kind]; h != nil {
		h(ctx, k.Name)
	}
}

// maxSettleRounds bounds Settle: a system that never settles is a bug, reported as one.
const maxSettleRounds = 100000

// Settle runs pending work in manual mode until none is left: work handed to Go (in the
// order it was handed over), then driver events, then due timers, then marked objects,
// round after round. It returns an error if work keeps coming (a livelock).
func (l *Loop) Settle(ctx context.Context) error {
	if !l.cfg.Manual {
		return fmt.Errorf("runtime: Settle needs the manual mode")
	}
	l.ctx = ctx
	for range maxSettleRounds {
		progressed := false
		l.mu.Lock()
		work := l.pending
		l.pending = nil
		l.mu.Unlock()
		for _, f := range work {
			f()
			progressed = true
		}
		for _, ch := range l.cfg.Events {
			for drained := false; !drained; {
				select {
				case ev := <-ch:
					l.cfg.OnEvent(ctx, ev)
					progressed = true
				default:
					drained = true
				}
			}
		}
		if l.timers.FireDue() {
			progressed = true
		}
		if l.reconcileDirty(ctx) {
			progressed = true
		}
		if !progressed {
			return nil
		}
	}
	return fmt.Errorf("runtime: work still pending after %d rounds", maxSettleRounds)
}

// Stop stops the timers (run mode ends with its context too).
func (l *Loop) Stop() { l.timers.Stop() }

// Deleted reports that the object under k is gone from the store: callers of AwaitDeleted
// waiting for it return.
func (l *Loop) Deleted(k Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.waiters[k] {
		close(ch)
	}
	delete(l.waiters, k)
}

// AwaitDeleted marks the objects, whose deletion the caller committed, and waits until each
// is Deleted. It returns the first that was not, and false, when ctx ends first; in manual
// mode it settles once and never blocks (nothing else would happen until the next Settle).
func (l *Loop) AwaitDeleted(ctx context.Context, keys []Key) (Key, bool) {
	chans := make([]chan struct{}, len(keys))
	l.mu.Lock()
	for i, k := range keys {
		chans[i] = make(chan struct{})
		l.waiters[k] = append(l.waiters[k], chans[i])
	}
	l.mu.Unlock()
	for _, k := range keys {
		l.Mark(k)
	}
	done := ctx.Done()
	if l.cfg.Manual {
		if err := l.Settle(ctx); err != nil {
			return keys[0], false
		}
		done = closed
	}
	for i, ch := range chans {
		select {
		case <-ch:
			continue
		default:
		}
		select {
		case <-ch:
		case <-done:
			return keys[i], false
		}
	}
	return Key{}, true
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
