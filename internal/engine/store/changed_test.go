package store

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Changed(b) is closed by the commit of an Update that writes b (a Put or a Delete), and
// by nothing else: not by a read, a write to another bucket, or an Update that failed.
func TestChangedIsClosedByACommittedWriteToItsBucket(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	jobs := s.Changed(Jobs)
	if err := s.View(func(tx *Tx) error { _, err := tx.Get(Jobs, "a", new(string)); return err }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *Tx) error { return tx.Put(Nodes, "n", "x") }); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("no")
	if err := s.Update(func(tx *Tx) error {
		if err := tx.Put(Jobs, "a", "x"); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("update err = %v", err)
	}
	if isClosed(jobs) {
		t.Fatal("closed without a committed write to jobs")
	}
	if err := s.Update(func(tx *Tx) error { return tx.Put(Jobs, "a", "x") }); err != nil {
		t.Fatal(err)
	}
	if !isClosed(jobs) {
		t.Fatal("not closed by a committed Put to jobs")
	}

	// A new channel for the next change; a Delete counts as a write.
	next := s.Changed(Jobs)
	if isClosed(next) {
		t.Fatal("the next change's channel is closed already")
	}
	if err := s.Update(func(tx *Tx) error { return tx.Delete(Jobs, "a") }); err != nil {
		t.Fatal(err)
	}
	if !isClosed(next) {
		t.Fatal("not closed by a committed Delete in jobs")
	}
}
