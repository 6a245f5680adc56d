package driver

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorKinds(t *testing.T) {
	cause := errors.New("connection reset")
	kinds := []struct {
		name string
		mark func(error) error
		is   func(error) bool
		kind error
	}{
		{"NotFound", NotFound, IsNotFound, ErrNotFound},
		{"NoCapacity", NoCapacity, IsNoCapacity, ErrNoCapacity},
		{"Transient", Transient, IsTransient, ErrTransient},
		{"Permanent", Permanent, IsPermanent, ErrPermanent},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			err := fmt.Errorf("starting task t on node n: %w", k.mark(cause))
			if !k.is(err) || !errors.Is(err, k.kind) {
				t.Fatalf("%v is not %v", err, k.kind)
			}
			if !errors.Is(err, cause) {
				t.Fatalf("%v lost its cause", err)
			}
			if got, want := err.Error(), "starting task t on node n: connection reset"; got != want {
				t.Fatalf("message %q, want %q", got, want)
			}
			for _, other := range kinds {
				if other.name != k.name && other.is(err) {
					t.Fatalf("%v is also %v", err, other.kind)
				}
			}
			if k.mark(nil) != nil {
				t.Fatal("marking nil must stay nil")
			}
			if !k.is(k.kind) {
				t.Fatalf("the sentinel itself is not %v", k.kind)
			}
		})
	}
}

func TestEventKindString(t *testing.T) {
	for k, want := range map[EventKind]string{NodeGone: "NodeGone", TaskExited: "TaskExited", NodeReady: "NodeReady", 0: "EventKind(0)"} {
		if k.String() != want {
			t.Errorf("%d: %q, want %q", int(k), k.String(), want)
		}
	}
}
