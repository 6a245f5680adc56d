package history

// Ring is a buffer of at most a fixed number of values: a Push past its capacity
// overwrites the oldest value. It is not safe for concurrent use.
type Ring[T any] struct {
	buf  []T
	head int // index of the oldest value
	n    int
}

// NewRing returns an empty ring of the given capacity (at least 1).
func NewRing[T any](capacity int) *Ring[T] {
	return &Ring[T]{buf: make([]T, max(capacity, 1))}
}

// Len is the number of values held.
func (r *Ring[T]) Len() int { return r.n }

// Cap is the most values the ring holds.
func (r *Ring[T]) Cap() int { return len(r.buf) }

// Push adds v as the newest value, dropping the oldest when the ring is full.
func (r *Ring[T]) Push(v T) {
	if r.n < len(r.buf) {
		r.buf[(r.head+r.n)%len(r.buf)] = v
		r.n++
		return
	}
	r.buf[r.head] = v
	r.head = (r.head + 1) % len(r.buf)
}

// At returns the i-th value, 0 being the oldest.
func (r *Ring[T]) At(i int) T { return r.buf[(r.head+i)%len(r.buf)] }

// DropOldest drops values from the oldest end while old says so.
func (r *Ring[T]) DropOldest(old func(T) bool) {
	var zero T
	for r.n > 0 && old(r.buf[r.head]) {
		r.buf[r.head] = zero
		r.head = (r.head + 1) % len(r.buf)
		r.n--
	}
}

// Values returns the values, oldest first, in a new slice.
func (r *Ring[T]) Values() []T {
	out := make([]T, r.n)
	for i := range out {
		out[i] = r.At(i)
	}
	return out
}
