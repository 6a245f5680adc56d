package artifacts

import (
	"archive/tar"
	"bytes"
	"context"
	"path/filepath"
	"testing"
)

// FuzzIntake feeds Intake arbitrary bytes as a tar stream. It must never panic; what it
// takes in must verify, come back out as a tar that is taken in under the same digest,
// and export below the export directory only; what it refuses leaves nothing after a
// collection.
func FuzzIntake(f *testing.F) {
	f.Add(tarOf(f, reg("a", "x"), dir("d/"), reg("d/b", "yy")))
	f.Add(tarOf(f, reg("a", "x"), symlink("l", "a"), symlink("m", "../a")))
	f.Add(tarOf(f, entry{name: "c", typ: tar.TypeChar}))
	f.Add(tarOf(f, reg("../x", "x")))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		ctx := context.Background()
		s, err := Open(filepath.Join(t.TempDir(), "artifacts"))
		if err != nil {
			t.Fatal(err)
		}
		in, err := s.Intake(ctx, TypeFolder, bytes.NewReader(stream), 1<<20)
		if err != nil {
			if _, _, err := s.Collect(nil); err != nil {
				t.Fatal(err)
			}
			assertEmpty(t, s)
			return
		}
		defer in.Release()
		if err := s.Verify(ctx, in.Digest); err != nil {
			t.Fatalf("a taken-in output does not verify: %v", err)
		}
		var out bytes.Buffer
		if err := s.WriteTar(ctx, &out, in.Digest); err != nil {
			t.Fatal(err)
		}
		again, err := s.Intake(ctx, TypeFolder, &out, 0)
		if err != nil {
			t.Fatalf("the written tar is refused: %v", err)
		}
		defer again.Release()
		if again.Digest != in.Digest || again.StoredBytes != 0 {
			t.Fatalf("round trip: digest %s stored %d, want %s stored 0", again.Digest, again.StoredBytes, in.Digest)
		}
		exportDir := filepath.Join(t.TempDir(), "x")
		if err := s.Export(ctx, in.Digest, exportDir); err != nil {
			t.Fatalf("Export: %v", err)
		}
		tree := readTree(t, exportDir)
		if len(tree) != in.FileCount {
			t.Fatalf("exported %d files, want %d", len(tree), in.FileCount)
		}
	})
}
