package keylock

import (
	"sync"
	"testing"
)

// Holders of one key take turns; the set forgets a key once nobody holds or waits for it.
func TestLocksSerialisePerKeyAndForget(t *testing.T) {
	var l Locks
	var wg sync.WaitGroup
	counts := map[string]int{}
	for i := range 200 {
		key := []string{"a", "b"}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := l.Lock(key)
			counts[key]++ // a data race (and a wrong count) if two holders of a key overlapped
			unlock()
		}()
	}
	wg.Wait()
	if counts["a"] != 100 || counts["b"] != 100 {
		t.Fatalf("counts %v; want 100 each", counts)
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
