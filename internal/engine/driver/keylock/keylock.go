// Package keylock serialises work per key: a driver's Create and Terminate of one node key
// take turns, while different keys run at once. A key's lock lives only while someone
// holds or waits for it, so the set stays as small as the work in flight.
package keylock

import "sync"

// Locks is a set of per-key mutexes. The zero value is ready to use.
type Locks struct {
	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	mu   sync.Mutex
	refs int
}

// Lock locks key, waiting for whoever holds it, and returns the function that unlocks it.
func (l *Locks) Lock(key string) (unlock func()) {
	l.mu.Lock()
	if l.keys == nil {
		l.keys = map[string]*entry{}
	}
	e := l.keys[key]
	if e == nil {
		e = &entry{}
		l.keys[key] = e
	}
	e.refs++
	l.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		l.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(l.keys, key)
		}
		l.mu.Unlock()
	}
}

// Len is how many keys are held or waited for.
func (l *Locks) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}
