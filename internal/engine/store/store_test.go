package store

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

type record struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func TestPutGetListDelete(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	err = s.Update(func(tx *Tx) error {
		for _, r := range []record{{"ws1/b", 2}, {"ws1/a", 1}, {"ws2/a", 3}} {
			if err := tx.Put(Computes, r.Name, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(func(tx *Tx) error {
		var got record
		ok, err := tx.Get(Computes, "ws1/b", &got)
		if err != nil || !ok || got.Count != 2 {
			t.Errorf("Get ws1/b = %+v, %v, %v; want count 2", got, ok, err)
		}
		if ok, _ := tx.Get(Computes, "ws9/x", &got); ok {
			t.Error("Get of a missing key reported found")
		}
		list, err := List[record](tx, Computes, "ws1/")
		if err != nil {
			return err
		}
		if len(list) != 2 || list[0].Name != "ws1/a" || list[1].Name != "ws1/b" {
			t.Errorf("List ws1/ = %+v; want ws1/a, ws1/b in order", list)
		}
		if keys := tx.Keys(Computes, "ws2/"); len(keys) != 1 || keys[0] != "ws2/a" {
			t.Errorf("Keys ws2/ = %v", keys)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *Tx) error { return tx.Delete(Computes, "ws1/a") }); err != nil {
		t.Fatal(err)
	}
	_ = s.View(func(tx *Tx) error {
		if keys := tx.Keys(Computes, ""); len(keys) != 2 {
			t.Errorf("after delete keys = %v; want 2", keys)
		}
		return nil
	})
}

func TestFailedUpdateIsRolledBack(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	boom := errors.New("boom")
	err = s.Update(func(tx *Tx) error {
		if err := tx.Put(Workspaces, "w", record{Name: "w"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update error = %v; want boom", err)
	}
	_ = s.View(func(tx *Tx) error {
		if ok, _ := tx.Get(Workspaces, "w", &record{}); ok {
			t.Error("a record written by a failed transaction is visible")
		}
		return nil
	})
}

func TestSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *Tx) error { return tx.Put(Meta, "k", record{Count: 7}) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got record
	_ = s.View(func(tx *Tx) error { _, err := tx.Get(Meta, "k", &got); return err })
	if got.Count != 7 {
		t.Fatalf("after reopen count = %d; want 7", got.Count)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// bbolt takes an flock per open file description, so a second open in the same
	// process contends exactly as a second engine process would.
	_, err = Open(path, 50*time.Millisecond)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open error = %v; want ErrLocked", err)
	}
}

// commits is the number of the database's last committed transaction.
func commits(t *testing.T, s *Store) int {
	t.Helper()
	var id int
	if err := s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

// An Update that writes nothing commits nothing (no fsync); any write, a bucket's sequence
// included, is committed and survives a reopen.
func TestUpdateCommitsOnlyWhatWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := commits(t, s)
	if err := s.Update(func(tx *Tx) error { _, err := tx.Get(Computes, "ws/a", new(record)); return err }); err != nil {
		t.Fatal(err)
	}
	if got := commits(t, s); got != before {
		t.Fatalf("an Update that only read committed: transaction %d, want still %d", got, before)
	}
	if err := s.Update(func(tx *Tx) error { return tx.Put(Computes, "ws/a", record{Name: "ws/a"}) }); err != nil {
		t.Fatal(err)
	}
	if got := commits(t, s); got != before+1 {
		t.Fatalf("a Put committed as transaction %d, want %d", got, before+1)
	}
	var seq uint64
	if err := s.Update(func(tx *Tx) error { seq, err = tx.NextSequence(Jobs); return err }); err != nil {
		t.Fatal(err)
	}
	if got := commits(t, s); got != before+2 {
		t.Fatalf("a NextSequence committed as transaction %d, want %d", got, before+2)
	}
	// A panic in fn rolls back and leaves the store usable.
	func() {
		defer func() { _ = recover() }()
		_ = s.Update(func(tx *Tx) error {
			_ = tx.Put(Computes, "ws/b", record{Name: "ws/b"})
			panic("boom")
		})
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Update(func(tx *Tx) error {
		if ok, err := tx.Get(Computes, "ws/a", new(record)); !ok || err != nil {
			t.Errorf("ws/a after a reopen: found %v, %v", ok, err)
		}
		if ok, _ := tx.Get(Computes, "ws/b", new(record)); ok {
			t.Error("ws/b, written by an Update that panicked, is stored")
		}
		next, err := tx.NextSequence(Jobs)
		if next != seq+1 {
			t.Errorf("the sequence after a reopen is %d, want %d", next, seq+1)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
