package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawTar writes entries as an uncompressed tar (the fuzzer mutates tar structure; the
// target gzips what it gets, since mutated gzip would almost never pass its checksum).
func rawTar(t testing.TB, entries []*tar.Header, bodies map[string]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		body := bodies[h.Name]
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write([]byte(body))
		}
	}
	_ = tw.Close()
	return buf.Bytes()
}

// FuzzUnpack unpacks arbitrary tar streams (gzipped here) under small limits. It must
// never panic, never write outside its destination (a sibling directory stays as it was,
// nothing else appears next to it), and a tree it accepts stays within the limits and
// holds no symlink that leads outside it.
func FuzzUnpack(f *testing.F) {
	reg := func(name string) *tar.Header { return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644} }
	dir := func(name string) *tar.Header { return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755} }
	sym := func(name, to string) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: to}
	}
	seeds := [][]*tar.Header{
		{dir("src/"), reg("src/train.py"), sym("link", "src/train.py")},
		{reg("../escape.txt")},
		{reg("a/../../escape.txt")},
		{reg("/etc/absolute.txt")},
		{reg(`C:\windows.txt`)},
		{sym("out", "../../outside"), reg("out/file.txt")},
		{sym("abs", "/etc"), reg("abs/passwd")},
		{sym("a", "b"), sym("b", ".."), reg("a/x")},
		{dir("d/"), sym("d/up", ".."), sym("d/up2", "up/..")},
		{{Typeflag: tar.TypeLink, Name: "hard", Linkname: "/etc/passwd"}},
		{{Typeflag: tar.TypeChar, Name: "dev", Devmajor: 1, Devminor: 3}},
		{reg("dup"), reg("dup")},
		{reg(strings.Repeat("p/", 200) + "deep.txt")},
		{{Typeflag: tar.TypeReg, Name: "pax", PAXRecords: map[string]string{"comment": strings.Repeat("x", 1<<16)}}},
		{{Typeflag: tar.TypeReg, Name: "huge", Size: 1 << 40}},
		{reg("x"), reg("y"), reg("z"), reg("w"), reg("v")},
	}
	for _, entries := range seeds {
		f.Add(rawTar(f, entries, map[string]string{"src/train.py": "print(1)\n", "a/x": "x"}))
	}
	limits := Limits{MaxBytes: 64 << 10, MaxFiles: 4}
	// One directory for every run; each run gets its own inside it (t.TempDir per run
	// costs more than the unpacking does).
	runs := f.TempDir()
	f.Fuzz(func(t *testing.T, tarBytes []byte) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(tarBytes)
		_ = zw.Close()

		base, err := os.MkdirTemp(runs, "run-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(base)
		dst := filepath.Join(base, "dst")
		sibling := filepath.Join(base, "sibling")
		if err := os.MkdirAll(sibling, 0o700); err != nil {
			t.Fatal(err)
		}
		err = Unpack(&gz, dst, limits)

		ents, _ := os.ReadDir(base)
		for _, e := range ents {
			if e.Name() != "dst" && e.Name() != "sibling" {
				t.Fatalf("Unpack wrote %s next to its destination (err %v)", e.Name(), err)
			}
		}
		if inSibling, _ := os.ReadDir(sibling); len(inSibling) != 0 {
			t.Fatalf("Unpack wrote into a sibling directory (err %v)", err)
		}
		if err != nil {
			return
		}
		realDst, err := filepath.EvalSymlinks(dst)
		if err != nil {
			t.Fatal(err)
		}
		var files, bytesTotal int64
		walkErr := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			switch {
			case info.Mode()&fs.ModeSymlink != 0:
				files++
				target, err := filepath.EvalSymlinks(p)
				if err != nil {
					return nil // dangling inside the tree: harmless
				}
				if rel, err := filepath.Rel(realDst, target); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
					t.Fatalf("accepted symlink %s leads outside the tree to %s", p, target)
				}
			case info.Mode().IsRegular():
				files++
				bytesTotal += info.Size()
			}
			return nil
		})
		if walkErr != nil {
			t.Fatalf("walking the accepted tree: %v", walkErr)
		}
		if files > int64(limits.MaxFiles) || bytesTotal > limits.MaxBytes {
			t.Fatalf("accepted %d files and %d bytes, over the limits %+v", files, bytesTotal, limits)
		}
	})
}
