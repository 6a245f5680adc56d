package artifacts

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is one member of a test tar stream.
type entry struct {
	name     string
	typ      byte
	body     string
	linkname string
	mode     int64
}

func reg(name, body string) entry {
	return entry{name: name, typ: tar.TypeReg, body: body, mode: 0o644}
}
func exe(name, body string) entry {
	return entry{name: name, typ: tar.TypeReg, body: body, mode: 0o755}
}
func dir(name string) entry { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeSymlink, linkname: target}
}

func tarOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.linkname, Mode: e.mode, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func takeIn(t *testing.T, s *Store, typ string, stream []byte) *Intake {
	t.Helper()
	in, err := s.Intake(context.Background(), typ, bytes.NewReader(stream), 0)
	if err != nil {
		t.Fatalf("Intake: %v", err)
	}
	return in
}

// readTree returns every regular file under root by slash path, with its mode's
// executable bit.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		rel, _ := filepath.Rel(root, p)
		key := filepath.ToSlash(rel)
		if info.Mode()&0o111 != 0 {
			key += "*"
		}
		out[key] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	s := openStore(t)
	stream := tarOf(t, dir("./"), dir("./model/"), reg("./model/weights.bin", "0123456789"),
		exe("./run.sh", "#!/bin/sh\necho hi\n"), reg("./model/config.json", `{"a":1}`), reg("./empty", ""),
		reg("./naïve name.txt", "utf-8"))
	in := takeIn(t, s, TypeFolder, stream)
	defer in.Release()
	if in.FileCount != 5 || in.Size != 10+18+7+0+5 {
		t.Fatalf("intake counts %d files of %d bytes, want 5 of 40", in.FileCount, in.Size)
	}
	want := []string{"empty", "model/config.json", "model/weights.bin", "naïve name.txt", "run.sh"}
	for i, f := range in.Manifest.Files {
		if f.Path != want[i] {
			t.Fatalf("manifest file %d is %q, want %q", i, f.Path, want[i])
		}
	}
	if d, _ := in.Manifest.Digest(); d != in.Digest {
		t.Fatalf("Manifest.Digest %s, intake digest %s", d, in.Digest)
	}
	got, err := s.Manifest(in.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != in.Digest {
		t.Fatalf("stored manifest has digest %s, want %s", d, in.Digest)
	}
	if err := s.Verify(context.Background(), in.Digest); err != nil {
		t.Fatal(err)
	}

	// The tar written back is taken in under the same digest, and is the same bytes twice.
	var a, b bytes.Buffer
	if err := s.WriteTar(context.Background(), &a, in.Digest); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteTar(context.Background(), &b, in.Digest); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("WriteTar gave different bytes for the same output")
	}
	again := takeIn(t, s, TypeFolder, a.Bytes())
	defer again.Release()
	if again.Digest != in.Digest {
		t.Fatalf("the written tar taken in again has digest %s, want %s", again.Digest, in.Digest)
	}

	out := filepath.Join(t.TempDir(), "out")
	if err := s.Export(context.Background(), in.Digest, out); err != nil {
		t.Fatal(err)
	}
	tree := readTree(t, out)
	wantTree := map[string]string{"empty": "", "model/config.json": `{"a":1}`, "model/weights.bin": "0123456789",
		"naïve name.txt": "utf-8", "run.sh*": "#!/bin/sh\necho hi\n"}
	if len(tree) != len(wantTree) {
		t.Fatalf("exported tree %v, want %v", tree, wantTree)
	}
	for k, v := range wantTree {
		if tree[k] != v {
			t.Fatalf("exported %q = %q, want %q (tree %v)", k, tree[k], v, tree)
		}
	}
	if err := s.Export(context.Background(), in.Digest, out); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Export into a full directory: %v, want an error saying it is not empty", err)
	}
}

func TestDedup(t *testing.T) {
	s := openStore(t)
	stream := tarOf(t, reg("a", "same"), reg("b/c", "same"), reg("d", "other"))
	first := takeIn(t, s, TypeFolder, stream)
	first.Release()
	if first.StoredBytes == 0 {
		t.Fatal("the first intake stored nothing")
	}
	bytes1, blobs1 := s.Usage()
	if blobs1 != 3 { // "same", "other", the manifest
		t.Fatalf("%d blobs, want 3: identical files are stored once", blobs1)
	}
	repeat := takeIn(t, s, TypeFolder, stream)
	repeat.Release()
	bytes2, blobs2 := s.Usage()
	if repeat.StoredBytes != 0 || bytes2 != bytes1 || blobs2 != blobs1 {
		t.Fatalf("repeat stored %d bytes (usage %d/%d blobs, was %d/%d), want 0", repeat.StoredBytes, bytes2, blobs2, bytes1, blobs1)
	}
	if repeat.Digest != first.Digest {
		t.Fatalf("repeat digest %s, want %s", repeat.Digest, first.Digest)
	}
}

func TestSymlinkInsideIsACopy(t *testing.T) {
	s := openStore(t)
	in := takeIn(t, s, TypeFolder, tarOf(t, reg("model/w.bin", "weights"), symlink("latest", "model/w.bin"),
		symlink("model/again", "../latest"), entry{name: "hard", typ: tar.TypeLink, linkname: "model/w.bin"}))
	defer in.Release()
	if in.FileCount != 4 {
		t.Fatalf("%d files, want 4", in.FileCount)
	}
	for _, f := range in.Manifest.Files {
		if f.Digest != in.Manifest.Files[len(in.Manifest.Files)-1].Digest {
			t.Fatalf("file %s has digest %s; every link should have the target's", f.Path, f.Digest)
		}
	}
	if _, blobs := s.Usage(); blobs != 2 {
		t.Fatalf("%d blobs, want 2 (the file and the manifest)", blobs)
	}
}

func TestIntakeRefuses(t *testing.T) {
	cases := []struct {
		name    string
		typ     string
		stream  []entry
		limit   int64
		path    string // the RefusedError's Path; "" for TooLargeError
		message string
	}{
		{name: "symlink out", stream: []entry{reg("a", "x"), symlink("sub/evil", "../../etc/passwd")}, path: "sub/evil", message: "outside the output"},
		{name: "absolute symlink", stream: []entry{symlink("evil", "/etc/passwd")}, path: "evil", message: "absolute path"},
		{name: "symlink to a directory", stream: []entry{reg("d/f", "x"), symlink("link", "d")}, path: "link", message: "directory"},
		{name: "dangling symlink", stream: []entry{symlink("link", "nothing")}, path: "link", message: "does not exist"},
		{name: "symlink loop", stream: []entry{symlink("a", "b"), symlink("b", "a")}, message: "more than 40"},
		{name: "char device", stream: []entry{{name: "./dev/null", typ: tar.TypeChar}}, path: "./dev/null", message: "device"},
		{name: "block device", stream: []entry{{name: "sda", typ: tar.TypeBlock}}, path: "sda", message: "device"},
		{name: "fifo", stream: []entry{{name: "pipe", typ: tar.TypeFifo}}, path: "pipe", message: "fifo"},
		{name: "not utf-8", stream: []entry{reg("bad\xff.txt", "x")}, path: "bad\xff.txt", message: "UTF-8"},
		{name: "dot dot", stream: []entry{reg("../up", "x")}, path: "../up", message: ".."},
		{name: "dot dot inside", stream: []entry{reg("a/../../up", "x")}, path: "a/../../up", message: ".."},
		{name: "absolute", stream: []entry{reg("/etc/x", "x")}, path: "/etc/x", message: "absolute"},
		{name: "twice", stream: []entry{reg("a", "x"), reg("./a", "y")}, path: "./a", message: "twice"},
		{name: "over the limit", stream: []entry{reg("a", "12345"), reg("b", "678901")}, limit: 10},
		{name: "over the limit through links", stream: []entry{reg("a", "123456"), symlink("b", "a")}, limit: 10},
		{name: "uri_file of two files", typ: TypeFile, stream: []entry{reg("a", "1"), reg("b", "2")}, message: "want 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			typ := tc.typ
			if typ == "" {
				typ = TypeFolder
			}
			in, err := s.Intake(context.Background(), typ, bytes.NewReader(tarOf(t, tc.stream...)), tc.limit)
			if err == nil {
				in.Release()
				t.Fatalf("Intake took the output in as %s", in.Digest)
			}
			var refused *RefusedError
			var tooLarge *TooLargeError
			switch {
			case tc.limit > 0:
				if !errors.As(err, &tooLarge) || tooLarge.Limit != tc.limit {
					t.Fatalf("error %v, want a TooLargeError of limit %d", err, tc.limit)
				}
			case tc.path != "":
				if !errors.As(err, &refused) || refused.Path != tc.path {
					t.Fatalf("error %v, want a RefusedError naming %q", err, tc.path)
				}
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q does not say %q", err, tc.message)
			}
			// Nothing stays: no pins, so one collection leaves the store empty.
			if _, _, err := s.Collect(nil); err != nil {
				t.Fatal(err)
			}
			assertEmpty(t, s)
		})
	}
}

func assertEmpty(t *testing.T, s *Store) {
	t.Helper()
	if b, n := s.Usage(); b != 0 || n != 0 {
		t.Fatalf("store holds %d blobs of %d bytes, want none", n, b)
	}
	for _, d := range []string{tmpDir, stagingDir} {
		entries, err := os.ReadDir(filepath.Join(s.dir, d))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 0 {
			t.Fatalf("%s holds %d entries, want none", d, len(entries))
		}
	}
	var left []string
	_ = s.walkBlobs(func(name string, _ int64) error { left = append(left, name); return nil })
	if len(left) != 0 {
		t.Fatalf("blobs left on disk: %v", left)
	}
}

func TestURIFile(t *testing.T) {
	s := openStore(t)
	in := takeIn(t, s, TypeFile, tarOf(t, reg("model.pkl", "pickled")))
	defer in.Release()
	if len(in.Manifest.Files) != 1 || in.Manifest.Files[0].Path != "model.pkl" || in.Manifest.Type != TypeFile {
		t.Fatalf("manifest %+v, want one file model.pkl of type uri_file", in.Manifest)
	}
	out := t.TempDir()
	if err := s.Export(context.Background(), in.Digest, out); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "model.pkl")); err != nil || string(b) != "pickled" {
		t.Fatalf("exported file %q, %v", b, err)
	}
}

// failingReader gives n bytes of r, then fails: an intake cut off mid-stream, as a node
// that died or a connection that dropped would leave it.
type failingReader struct {
	r io.Reader
	n int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("connection lost")
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= n
	return n, err
}

func TestCrashSafety(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "artifacts")
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	kept := takeIn(t, s, TypeFolder, tarOf(t, reg("keep", "kept content")))
	kept.Release()

	// An intake cut off halfway leaves nothing pinned and nothing named.
	big := tarOf(t, reg("a", strings.Repeat("a", 100_000)), reg("b", strings.Repeat("b", 100_000)))
	if _, err := s.Intake(ctx, TypeFolder, &failingReader{r: bytes.NewReader(big), n: 150_000}, 0); err == nil {
		t.Fatal("an intake cut off halfway succeeded")
	}

	// An intake whose caller never registered it, then a crash: its blobs are named, but
	// nothing references them. A crash mid-write leaves tmp files too.
	orphan := takeIn(t, s, TypeFolder, tarOf(t, reg("orphan", "never registered"), reg("keep2", "kept content")))
	if err := os.WriteFile(filepath.Join(root, tmpDir, "blob-crashed"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Pinned blobs survive a collection of this store even though nothing references them.
	if n, _, err := s.Collect([]string{kept.Digest}); err != nil || n != 0 {
		t.Fatalf("Collect removed %d blobs (%v) while an intake pinned them", n, err)
	}
	if err := s.Verify(ctx, orphan.Digest); err != nil {
		t.Fatalf("a pinned output lost blobs to a collection: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, tmpDir, "blob-crashed")); err == nil {
		t.Fatal("a crashed intake's tmp file survived a collection")
	}

	// The engine restarts: pins are gone with the process.
	s2, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	removed, removedBytes, err := s2.Collect([]string{kept.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if removed != 2 || removedBytes == 0 { // "never registered" and orphan's manifest
		t.Fatalf("Collect removed %d blobs of %d bytes, want 2", removed, removedBytes)
	}
	if err := s2.Verify(ctx, kept.Digest); err != nil {
		t.Fatalf("a referenced output lost blobs: %v", err)
	}
	if _, err := s2.Manifest(orphan.Digest); !IsNotFound(err) {
		t.Fatalf("the orphan's manifest: %v, want not found", err)
	}
	if _, blobs := s2.Usage(); blobs != 2 {
		t.Fatalf("%d blobs after collection, want 2 (kept's file and manifest)", blobs)
	}

	// Nothing referenced: everything goes.
	if _, _, err := s2.Collect(nil); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, s2)
}

func TestCollectStopsOnAnUnreadableReference(t *testing.T) {
	s := openStore(t)
	in := takeIn(t, s, TypeFolder, tarOf(t, reg("a", "x")))
	in.Release()
	missing := digestOf([]byte("no such manifest"))
	if _, _, err := s.Collect([]string{missing}); !IsNotFound(err) {
		t.Fatalf("Collect with a missing reference: %v, want not found", err)
	}
	if err := s.Verify(context.Background(), in.Digest); err != nil {
		t.Fatalf("a failed collection removed blobs: %v", err)
	}
}

func TestVerifyDetectsDamage(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	in := takeIn(t, s, TypeFolder, tarOf(t, reg("a", "alpha"), reg("b", "beta")))
	defer in.Release()
	blob := func(i int) string {
		name, _ := blobName(in.Manifest.Files[i].Digest)
		return s.blobPath(name)
	}
	if err := os.WriteFile(blob(0), []byte("alphA"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(ctx, in.Digest); err == nil || !strings.Contains(err.Error(), `file "a"`) {
		t.Fatalf("Verify of a corrupted blob: %v, want an error naming file a", err)
	}
	if err := os.Remove(blob(1)); err != nil {
		t.Fatal(err)
	}
	os.Remove(blob(0))
	if err := s.Verify(ctx, in.Digest); !IsNotFound(err) || !strings.Contains(err.Error(), `file "a"`) {
		t.Fatalf("Verify of a missing blob: %v, want not found naming file a", err)
	}
	name, _ := blobName(in.Digest)
	if err := os.WriteFile(s.blobPath(name), []byte(`{"type":"uri_folder","files":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Manifest(in.Digest); err == nil || !strings.Contains(err.Error(), "content has digest") {
		t.Fatalf("Manifest of a replaced manifest blob: %v, want a digest mismatch", err)
	}
}

func TestStage(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	in := takeIn(t, s, TypeFolder, tarOf(t, reg("m/w", "weights")))
	defer in.Release()
	dir1, release1, err := s.Stage(ctx, in.Digest)
	if err != nil {
		t.Fatal(err)
	}
	dir2, release2, err := s.Stage(ctx, in.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if dir1 != dir2 {
		t.Fatalf("two stages of one digest gave %s and %s", dir1, dir2)
	}
	if b, err := os.ReadFile(filepath.Join(dir1, "m", "w")); err != nil || string(b) != "weights" {
		t.Fatalf("staged file %q, %v", b, err)
	}
	release1()
	release1()
	if _, err := os.Stat(dir1); err != nil {
		t.Fatalf("the staged tree went while a holder remained: %v", err)
	}
	release2()
	if _, err := os.Stat(dir1); !os.IsNotExist(err) {
		t.Fatalf("the staged tree stayed after the last release: %v", err)
	}
	if _, _, err := s.Stage(ctx, digestOf([]byte("nothing"))); !IsNotFound(err) {
		t.Fatalf("Stage of an unknown digest: %v, want not found", err)
	}
}

func TestManifestCheck(t *testing.T) {
	d := digestOf([]byte("x"))
	bad := []Manifest{
		{Type: "folder"},
		{Type: TypeFile},
		{Type: TypeFolder, Files: []File{{Path: "b", Digest: d}, {Path: "a", Digest: d}}},
		{Type: TypeFolder, Files: []File{{Path: "a", Digest: d}, {Path: "a", Digest: d}}},
		{Type: TypeFolder, Files: []File{{Path: "a/./b", Digest: d}}},
		{Type: TypeFolder, Files: []File{{Path: "a", Digest: "sha256:XYZ"}}},
		{Type: TypeFolder, Files: []File{{Path: "a", Digest: d, Size: -1}}},
	}
	for _, m := range bad {
		if _, err := m.Digest(); err == nil {
			t.Errorf("manifest %+v has a digest; want an error", m)
		}
	}
}
