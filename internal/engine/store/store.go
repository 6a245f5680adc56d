// Package store is the engine's crash-safe persistence: a bbolt database (one file, ACID
// transactions, fsync on commit) holding JSON-encoded records in one bucket per kind.
// Every state change is committed here before the engine acts on it, so after a crash the
// engine can reconcile what it recorded with what is really running.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Bucket names one kind of record.
type Bucket string

const (
	Workspaces Bucket = "workspaces"
	Computes   Bucket = "computes"
	Endpoints  Bucket = "endpoints"
	Nodes      Bucket = "nodes"
	Jobs       Bucket = "jobs"
	// Environments holds environments, keyed "<workspace>/<name>".
	Environments Bucket = "environments"
	// Schedules holds schedules (mlcompute_schedule), keyed "<workspace>/<name>".
	Schedules   Bucket = "schedules"
	Idempotency Bucket = "idempotency"
	Meta        Bucket = "meta"
	// ActiveJobs indexes the jobs that are not finished, keyed "<compute key>/<job ID>"
	// (value: the job's key), so a pass reads its compute's live jobs, not the history.
	ActiveJobs Bucket = "active_jobs"
	// QueuedJobs indexes the Queued jobs in queue order, keyed "<compute key>/<submitted
	// at>/<job ID>" (value: the job's key), so a pass reads only the head of a long queue.
	QueuedJobs Bucket = "queued_jobs"
	// PipelineWakes holds a marker for each step job of a pipeline that ended and that the
	// pipeline has not yet taken into account, keyed "<workspace>/<pipeline ID>/<job ID>":
	// written in the write that ends the step, so a crash loses no wake-up.
	PipelineWakes Bucket = "pipeline_wakes"
	// ReuseIndex holds, for each reuse key of a pipeline step, the runs that completed with
	// it and their outputs' manifest digests, keyed "<workspace>/<key>/<pipeline ID>/<step>".
	ReuseIndex Bucket = "reuse_index"
	// ReuseInFlight holds, for each reuse key a pipeline step runs with now, that run and
	// the pipelines whose steps of the same key wait for it, keyed "<workspace>/<key>".
	ReuseInFlight Bucket = "reuse_in_flight"
	// Tokens holds the API tokens, keyed by name: their role, workspaces, expiry and the
	// SHA-256 of their secret, never the secret.
	Tokens Bucket = "tokens"
)

var allBuckets = []Bucket{Workspaces, Computes, Endpoints, Nodes, Jobs, Environments, Schedules, Idempotency, Meta, ActiveJobs, QueuedJobs, PipelineWakes, ReuseIndex, ReuseInFlight, Tokens}

// ErrLocked is returned by Open when another process holds the database.
var ErrLocked = errors.New("store is locked by another process")

// ErrDamaged is wrapped by Open's error for a database file that is not a sound bbolt
// database: truncated, overwritten, or not a database at all.
var ErrDamaged = errors.New("store is damaged")

// DamagedError says which store is damaged, why, and what to do, on one line.
type DamagedError struct {
	Path  string
	Cause string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("the engine's store %s is damaged (%s): stop every engine on this data dir, then restore a backup "+
		"(one made with 'mlcompute backup FILE': tar -xf FILE -C <data dir>), or move it away to start with an empty store", e.Path, e.Cause)
}

// Unwrap makes errors.Is(err, ErrDamaged) true.
func (e *DamagedError) Unwrap() error { return ErrDamaged }

// Store is an open database.
type Store struct {
	db *bolt.DB

	// changed holds, per bucket, the channel that the next committed write to it closes.
	changedMu sync.Mutex
	changed   map[Bucket]chan struct{}
	hooks     []commitHook
}

// Open opens (creating if needed) the database at path. It fails with ErrLocked after
// lockWait when another process has it open, which is how a second engine on the same data
// dir is refused, and with a *DamagedError (never a panic or a SIGBUS) when the file is not
// a sound database: every page is read once before Open returns.
func Open(path string, lockWait time.Duration) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating store directory: %w", err)
	}
	var db *bolt.DB
	err := guard(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: lockWait})
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("opening %s: %w", path, ErrLocked)
	}
	if err != nil {
		if db != nil {
			db.Close()
		}
		if isOpenDamage(err) {
			return nil, &DamagedError{Path: path, Cause: err.Error()}
		}
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		db.Close()
		return nil, fmt.Errorf("securing %s: %w", path, err)
	}
	if err := verify(db); err != nil {
		db.Close()
		return nil, &DamagedError{Path: path, Cause: err.Error()}
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("creating buckets: %w", err)
	}
	return &Store{db: db}, nil
}

// isOpenDamage reports whether an error of bolt.Open means the file is no sound database,
// as opposed to a fault of the machine (permissions, a missing directory).
func isOpenDamage(err error) bool {
	var p panicked
	return errors.As(err, &p) || errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) ||
		errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrInvalidMapping) ||
		strings.Contains(err.Error(), "file size too small")
}

// verify reads every bucket, key and value once, so that a truncated or overwritten file
// shows here as an error rather than later as a panic or a SIGBUS in the engine, and then
// runs bbolt's own consistency check (free pages, page references).
func verify(db *bolt.DB) error {
	err := guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(b) })
		})
	})
	if err != nil {
		return err
	}
	return db.View(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() {
			if first == nil {
				first = err
			}
		}
		return first
	})
}

// walk reads every key and value of b and of the buckets nested in it.
func walk(b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				return walk(nested)
			}
		}
		return nil
	})
}

// panicked is a panic (or a memory fault, made a panic) caught by guard.
type panicked struct{ value any }

func (p panicked) Error() string { return fmt.Sprintf("reading the file failed: %v", p.value) }

// guard runs fn, turning a panic, and a memory fault on the mapped file (SIGBUS past the
// end of a truncated file), into an error.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = panicked{r}
		}
	}()
	return fn()
}

// WriteTo writes a consistent copy of the whole database to w, as of one read
// transaction; writers go on meanwhile. It returns the number of bytes written.
func (s *Store) WriteTo(w io.Writer) (int64, error) {
	var n int64
	err := s.Backup(func(_ int64, copyTo func(io.Writer) (int64, error)) error {
		var err error
		n, err = copyTo(w)
		return err
	})
	return n, err
}

// Backup calls fn, inside one read transaction, with the size of a consistent copy of the
// database and a function that writes that copy (what an HTTP handler needs to announce
// the length before it streams). Writers go on meanwhile.
func (s *Store) Backup(fn func(size int64, copyTo func(io.Writer) (int64, error)) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(tx.Size(), tx.WriteTo) })
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Update runs fn in a read-write transaction, committed (and fsynced) when fn returns nil
// and wrote something; one that wrote nothing has nothing to make durable and is rolled
// back, which spares the two fsyncs of a commit (a pass that decides nothing is the
// commonest write of all). Watchers of the buckets it wrote (Changed) are woken once it is
// committed.
func (s *Store) Update(fn func(*Tx) error) error {
	t := &Tx{}
	err := s.update(t, fn)
	if err == nil && len(t.wrote) > 0 {
		s.changedMu.Lock()
		for b := range t.wrote {
			if ch := s.changed[b]; ch != nil {
				close(ch)
				delete(s.changed, b)
			}
		}
		hooks := s.hooks
		s.changedMu.Unlock()
		for _, h := range hooks {
			if t.wrote[h.bucket] {
				h.f()
			}
		}
	}
	return err
}

// OnCommit has f called after each Update that wrote bucket b has committed, in the
// writer's goroutine: f must be quick and must not write (hand work to a loop).
func (s *Store) OnCommit(b Bucket, f func()) {
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	s.hooks = append(s.hooks, commitHook{b, f})
}

type commitHook struct {
	bucket Bucket
	f      func()
}

// update is bbolt's DB.Update, but for the commit of a transaction that wrote nothing.
func (s *Store) update(t *Tx, fn func(*Tx) error) error {
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	t.tx = tx
	// Rolled back on every path but a commit (a panic in fn included); after a commit the
	// rollback does nothing.
	defer func() { _ = tx.Rollback() }()
	if err := fn(t); err != nil {
		return err
	}
	if !t.dirty {
		return nil
	}
	return tx.Commit()
}

// Changed returns a channel that is closed once an Update that writes bucket b (a Put or
// a Delete) has committed. Take it before reading what it guards: a change committed
// after the read then always closes it, so a follower waits for the store without
// reading it on an interval.
func (s *Store) Changed(b Bucket) <-chan struct{} {
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	if s.changed == nil {
		s.changed = map[Bucket]chan struct{}{}
	}
	ch := s.changed[b]
	if ch == nil {
		ch = make(chan struct{})
		s.changed[b] = ch
	}
	return ch
}

// View runs fn in a read-only transaction.
func (s *Store) View(fn func(*Tx) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}

// Tx is a transaction.
type Tx struct {
	tx    *bolt.Tx
	wrote map[Bucket]bool // the buckets written, for Store.Changed
	dirty bool            // anything written, a bucket's sequence included: Update commits
}

// Size is the size of the copy WriteTo writes.
func (t *Tx) Size() int64 { return t.tx.Size() }

// WriteTo writes a consistent copy of the whole database to w, as of this transaction
// (a backup taken together with what the transaction reads).
func (t *Tx) WriteTo(w io.Writer) (int64, error) { return t.tx.WriteTo(w) }

func (t *Tx) markWritten(b Bucket) {
	t.dirty = true
	if t.wrote == nil {
		t.wrote = map[Bucket]bool{}
	}
	t.wrote[b] = true
}

// Get decodes the record at key into v and reports whether it exists.
func (t *Tx) Get(b Bucket, key string, v any) (bool, error) {
	raw := t.tx.Bucket([]byte(b)).Get([]byte(key))
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("decoding %s/%s: %w", b, key, err)
	}
	return true, nil
}

// Put encodes v and stores it at key.
func (t *Tx) Put(b Bucket, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s/%s: %w", b, key, err)
	}
	t.markWritten(b)
	return t.tx.Bucket([]byte(b)).Put([]byte(key), raw)
}

// Delete removes key; removing a missing key is not an error.
func (t *Tx) Delete(b Bucket, key string) error {
	t.markWritten(b)
	return t.tx.Bucket([]byte(b)).Delete([]byte(key))
}

// Keys lists the keys that start with prefix, in byte order.
func (t *Tx) Keys(b Bucket, prefix string) []string {
	var keys []string
	c := t.tx.Bucket([]byte(b)).Cursor()
	for k, _ := c.Seek([]byte(prefix)); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, string(k))
	}
	return keys
}

// EachKey calls f with the keys that start with prefix, in byte order, until f returns
// false: a reader that needs only the first few keys does not walk them all.
func (t *Tx) EachKey(b Bucket, prefix string, f func(key string) bool) {
	c := t.tx.Bucket([]byte(b)).Cursor()
	for k, _ := c.Seek([]byte(prefix)); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		if !f(string(k)) {
			return
		}
	}
}

func hasPrefix(k []byte, prefix string) bool {
	return len(k) >= len(prefix) && string(k[:len(prefix)]) == prefix
}

// List decodes every record whose key starts with prefix, in key order.
func List[T any](t *Tx, b Bucket, prefix string) ([]T, error) {
	var out []T
	c := t.tx.Bucket([]byte(b)).Cursor()
	for k, raw := c.Seek([]byte(prefix)); k != nil && hasPrefix(k, prefix); k, raw = c.Next() {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("decoding %s/%s: %w", b, k, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// NextSequence returns the next number of a bucket's counter (1, 2, ...), committed with
// the transaction: IDs made from it sort in creation order, even with equal timestamps.
func (t *Tx) NextSequence(b Bucket) (uint64, error) {
	t.dirty = true
	return t.tx.Bucket([]byte(b)).NextSequence()
}
