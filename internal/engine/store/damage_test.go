package store

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// filled makes a store at path with enough records to span many pages, and closes it.
func filled(t *testing.T, path string) {
	t.Helper()
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for batch := range 20 {
		err := s.Update(func(tx *Tx) error {
			for i := range 100 {
				name := fmt.Sprintf("ws/%02d-%03d", batch, i)
				if err := tx.Put(Jobs, name, record{Name: name + strings.Repeat("x", 200), Count: i}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A damaged state.db gives one line naming the file and what to do, never a panic or a
// SIGBUS (either would end this test binary).
func TestOpenOfADamagedStore(t *testing.T) {
	pageSize := os.Getpagesize()
	for name, damage := range map[string]func(t *testing.T, path string){
		"not a database": func(t *testing.T, path string) {
			junk := make([]byte, 64<<10)
			_, _ = rand.Read(junk)
			if err := os.WriteFile(path, junk, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"truncated": func(t *testing.T, path string) {
			filled(t, path)
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()/3/int64(pageSize)*int64(pageSize)); err != nil {
				t.Fatal(err)
			}
		},
		"pages overwritten": func(t *testing.T, path string) {
			filled(t, path)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Keep the two meta pages; scribble over every other page's header.
			for off := 2 * pageSize; off+64 <= len(raw); off += pageSize {
				_, _ = rand.Read(raw[off : off+64])
			}
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"meta pages zeroed": func(t *testing.T, path string) {
			filled(t, path)
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteAt(bytes.Repeat([]byte{0}, 2*pageSize), 0)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			damage(t, path)
			s, err := Open(path, time.Second)
			if err == nil {
				s.Close()
				t.Fatal("Open of a damaged store succeeded")
			}
			var damaged *DamagedError
			if !errors.As(err, &damaged) || !errors.Is(err, ErrDamaged) {
				t.Fatalf("Open = %v; want a DamagedError", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, path) || !strings.Contains(msg, "backup") {
				t.Fatalf("message %q; want one line naming %s and a backup", msg, path)
			}
		})
	}
}

// Backup writes a consistent copy that opens as a store with the same records.
func TestWriteToMakesAUsableCopy(t *testing.T) {
	dir := t.TempDir()
	filled(t, filepath.Join(dir, "state.db"))
	s, err := Open(filepath.Join(dir, "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var buf bytes.Buffer
	n, err := s.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("WriteTo = %d, %v (buffer %d)", n, err, buf.Len())
	}
	copyPath := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(copyPath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(copyPath, time.Second)
	if err != nil {
		t.Fatalf("opening the copy: %v", err)
	}
	defer c.Close()
	var got record
	err = c.View(func(tx *Tx) error {
		_, err := tx.Get(Jobs, "ws/19-099", &got)
		return err
	})
	if err != nil || got.Count != 99 {
		t.Fatalf("record in the copy = %+v, %v", got, err)
	}
}
