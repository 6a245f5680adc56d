package runtime

import (
	"context"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

func newManual(t *testing.T) (*Loop, *clocktesting.FakeClock, *[]string) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	l := New(Config{Clock: clk, Manual: true})
	var log []string
	l.Handle(Compute, func(_ context.Context, name string) { log = append(log, "compute "+name) })
	l.Handle(Endpoint, func(_ context.Context, name string) { log = append(log, "endpoint "+name) })
	return l, clk, &log
}

func TestManualLoopRunsNothingUntilSettle(t *testing.T) {
	l, _, log := newManual(t)
	l.Mark(ComputeKey("ws/b"))
	l.Mark(ComputeKey("ws/a"))
	l.Mark(ComputeKey("ws/a")) // marks merge
	l.Mark(EndpointKey("ws/e"))
	ran := false
	l.Go(func() { ran = true })
	if len(*log) != 0 || ran {
		t.Fatalf("a manual loop ran work before Settle: %v, go ran %v", *log, ran)
	}
	if err := l.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Work handed to Go first, then marked objects in key order (kind, then name), once each.
	want := []string{"compute ws/a", "compute ws/b", "endpoint ws/e"}
	if !ran || !slices.Equal(*log, want) {
		t.Fatalf("settled %v (go ran %v); want %v", *log, ran, want)
	}
}

func TestManualTimersFireAtTheirDeadlineOnSettle(t *testing.T) {
	l, clk, log := newManual(t)
	idle := Timer{Kind: NodeIdle, Object: ComputeKey("ws/c"), Sub: "node-1"}
	l.SetTimer(idle, clk.Now().Add(time.Minute))
	l.SetTimer(Timer{Kind: Retry, Object: ComputeKey("ws/gone")}, clk.Now().Add(time.Minute))
	l.RemoveTimer(Timer{Kind: Retry, Object: ComputeKey("ws/gone")})

	clk.Step(time.Minute - time.Nanosecond)
	if err := l.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(*log) != 0 {
		t.Fatalf("a timer fired 1ns before its deadline: %v", *log)
	}
	clk.Step(time.Nanosecond)
	if err := l.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"compute ws/c"}; !slices.Equal(*log, want) {
		t.Fatalf("at the deadline: %v; want %v (the removed timer must not fire)", *log, want)
	}
	if _, ok := l.TimerDeadline(idle); ok {
		t.Fatal("a fired timer is still set")
	}
}

func TestSettleDrainsDriverEventsAndReportsALivelock(t *testing.T) {
	l, _, log := newManual(t)
	events := make(chan driver.Event, 2)
	l.Watch([]<-chan driver.Event{events}, func(_ context.Context, ev driver.Event) { l.Mark(ComputeKey(ev.NodeKey)) })
	events <- driver.Event{Kind: driver.NodeGone, NodeKey: "ws/x"}
	if err := l.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"compute ws/x"}; !slices.Equal(*log, want) {
		t.Fatalf("after an event: %v; want %v", *log, want)
	}
	// A handler that always marks itself again never settles: Settle says so.
	l.Handle(Compute, func(_ context.Context, name string) { l.Mark(ComputeKey(name)) })
	l.Mark(ComputeKey("ws/loop"))
	if err := l.Settle(context.Background()); err == nil {
		t.Fatal("Settle returned nil on work that never ends")
	}
}

func TestAwaitDeletedInManualMode(t *testing.T) {
	l, _, _ := newManual(t)
	gone := ComputeKey("ws/gone")
	stays := ComputeKey("ws/stays")
	l.Handle(Compute, func(_ context.Context, name string) {
		if name == gone.Name {
			l.Deleted(gone)
		}
	})
	if k, ok := l.AwaitDeleted(context.Background(), []Key{gone}); !ok {
		t.Fatalf("AwaitDeleted of a compute its pass deletes: not deleted (%v)", k)
	}
	if k, ok := l.AwaitDeleted(context.Background(), []Key{gone, stays}); ok || k != stays {
		t.Fatalf("AwaitDeleted with one that stays = %v, %v; want %v, false", k, ok, stays)
	}
}
