package keylock

import (
	"sync"
	"testing"
)

// Holders of one key take turns; the set forgets a key once nobody holds or waits for it.
func TestLocksSerialisePerKeyAndForget(t *testing.T) {
	var l Locks
	var wg sync.WaitGroup
	// One counter per key, each written only by that key's holders; the map itself is
	// only read, so holders of different keys may run at once.
	counts := map[string]*int{"a": new(int), "b": new(int)}
	for i := range 200 {
		key := []string{"a", "b"}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := l.Lock(key)
			*counts[key]++ // a data race (and a wrong count) if two holders of a key overlapped
			unlock()
		}()
	}
	wg.Wait()
	if *counts["a"] != 100 || *counts["b"] != 100 {
		t.Fatalf("counts a=%d b=%d; want 100 each", *counts["a"], *counts["b"])
	}
	if n := l.Len(); n != 0 {
		t.Fatalf("%d keys left after every holder unlocked; want 0", n)
	}
}

// Different keys do not wait for each other.
func TestLocksOfDifferentKeysDoNotWait(t *testing.T) {
	var l Locks
	unlockA := l.Lock("a")
	unlockB := l.Lock("b") // would block for ever if keys shared one mutex
	if n := l.Len(); n != 2 {
		t.Fatalf("%d keys held; want 2", n)
	}
	unlockB()
	unlockA()
}
