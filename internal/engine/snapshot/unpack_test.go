package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// craft builds a gzip'd tar from headers; a regular file's contents are its name unless
// Size says otherwise, in which case it is that many x's.
func craft(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, hdr := range hdrs {
		var body []byte
		if hdr.Typeflag == tar.TypeReg {
			if hdr.Size == 0 {
				hdr.Size = int64(len(hdr.Name))
				body = []byte(hdr.Name)
			} else {
				body = bytes.Repeat([]byte("x"), int(hdr.Size))
			}
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func file(name string) *tar.Header { return &tar.Header{Typeflag: tar.TypeReg, Name: name} }

func link(name, target string) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}
}

// Content and links round-trip; of the modes, the owner's bits do (an executable stays
// executable) and group and other bits are dropped: a stored snapshot is private.
func TestPackUnpack_RoundTripKeepsContentModesAndLinks(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{
		"train.py":          "import torch\n",
		"run.sh":            "#!/bin/sh\nexec python train.py\n",
		"pkg/__init__.py":   "",
		"pkg/bin/tool":      "binary\x00data",
		"empty/":            "",
		"conf/settings.ini": "[a]\nb=c\n",
		longName:            "a name past tar's 100 bytes",
	})
	mustChmod(t, filepath.Join(src, "run.sh"), 0o755)
	mustChmod(t, filepath.Join(src, "pkg/bin/tool"), 0o750)
	mustChmod(t, filepath.Join(src, "conf/settings.ini"), 0o600)
	if err := os.Symlink("pkg/bin/tool", filepath.Join(src, "tool")); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	m, err := Pack(src, &buf, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := Unpack(&buf, dst, DefaultLimits); err != nil {
		t.Fatalf("Unpack: %v", err)
	}

	for name, mode := range map[string]os.FileMode{
		"train.py": 0o600, "run.sh": 0o700, longName: 0o600, "pkg/__init__.py": 0o600, "pkg/bin/tool": 0o700, "conf/settings.ini": 0o600,
	} {
		want, _ := os.ReadFile(filepath.Join(src, name))
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: content %q, %v; want %q", name, got, err, want)
		}
		if fi, err := os.Stat(filepath.Join(dst, name)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, %v; want %v", name, fi.Mode().Perm(), err, mode)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty directory not restored: %v", err)
	}
	for _, dir := range []string{".", "empty", "pkg", "pkg/bin"} {
		if fi, err := os.Stat(filepath.Join(dst, dir)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("directory %s: mode %v, %v; want 0700", dir, fi.Mode().Perm(), err)
		}
	}
	if target, err := os.Readlink(filepath.Join(dst, "tool")); err != nil || target != "pkg/bin/tool" {
		t.Errorf("symlink tool -> %q, %v; want pkg/bin/tool", target, err)
	}
	if m.Files != 7 {
		t.Errorf("Files = %d, want 7", m.Files)
	}
}

var longName = "deep/" + strings.Repeat("d", 120) + "/module.py"

func mustChmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func TestUnpack_RejectsUnsafeArchives(t *testing.T) {
	cases := []struct {
		name string
		hdrs []*tar.Header
		want string
	}{
		{"parent traversal", []*tar.Header{file("../evil")}, `entry "../evil" has a .. element`},
		{"nested traversal", []*tar.Header{file("a/../../evil")}, `has a .. element`},
		{"absolute path", []*tar.Header{file("/tmp/evil")}, `entry "/tmp/evil" has an absolute path`},
		{"absolute symlink", []*tar.Header{link("passwd", "/etc/passwd")}, "symlink passwd points to an absolute path"},
		{"escaping symlink", []*tar.Header{link("up", "../..")}, "symlink up points outside the directory"},
		{"write through escaping symlink", []*tar.Header{link("up", ".."), file("up/evil")}, "symlink up points outside"},
		{
			"symlink chain", // d/b -> .. is the root; a -> d/b/.. is then the root's parent
			[]*tar.Header{{Typeflag: tar.TypeDir, Name: "d/"}, link("d/b", ".."), link("a", "d/b/..")},
			"symlink a points outside the directory",
		},
		{
			"link made to escape by a later entry", // lexically inside when it arrives
			[]*tar.Header{link("a", "d/b/.."), {Typeflag: tar.TypeDir, Name: "d/"}, link("d/b", "..")},
			"symlink a points outside the directory",
		},
		{"hard link", []*tar.Header{file("a"), {Typeflag: tar.TypeLink, Name: "b", Linkname: "a"}}, "unsupported type"},
		{"device", []*tar.Header{{Typeflag: tar.TypeChar, Name: "null"}}, "unsupported type"},
		{"duplicate", []*tar.Header{file("a"), file("a")}, "entry a appears twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "dst")
			err := Unpack(bytes.NewReader(craft(t, tc.hdrs...)), dst, DefaultLimits)
			if !IsInvalidArchive(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Unpack error = %v, want ErrInvalidArchive with %q", err, tc.want)
			}
			entries, _ := os.ReadDir(parent)
			if len(entries) != 1 {
				t.Errorf("Unpack wrote outside dst: %v", entries)
			}
		})
	}
}

func TestUnpack_EnforcesLimits(t *testing.T) {
	cases := []struct {
		name   string
		hdrs   []*tar.Header
		limits Limits
		kind   LimitKind
		want   string
	}{
		{"files", []*tar.Header{file("a"), file("b"), link("c", "a")}, Limits{MaxBytes: 100, MaxFiles: 2}, LimitFiles,
			"snapshot archive has more than the limit of 2 files"},
		{"bytes", []*tar.Header{{Typeflag: tar.TypeReg, Name: "a", Size: 600}, {Typeflag: tar.TypeReg, Name: "b", Size: 600}},
			Limits{MaxBytes: 1024, MaxFiles: 10}, LimitBytes, "snapshot archive holds more than the limit of 1 KiB"},
		{"directories", []*tar.Header{{Typeflag: tar.TypeDir, Name: "a/"}, {Typeflag: tar.TypeDir, Name: "b/"}},
			Limits{MaxBytes: 100, MaxFiles: 1}, LimitDirs, "snapshot archive has more than the limit of 1 directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := t.TempDir()
			err := Unpack(bytes.NewReader(craft(t, tc.hdrs...)), dst, tc.limits)
			var le *LimitError
			if !errors.As(err, &le) || le.Kind != tc.kind || err.Error() != tc.want {
				t.Fatalf("Unpack error = %v, want a *LimitError %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dst, "b")); tc.kind == LimitBytes && err == nil {
				t.Error("Unpack wrote the file that went over the byte limit")
			}
		})
	}
}

func TestUnpack_CorruptArchiveIsInvalid(t *testing.T) {
	archive := craft(t, &tar.Header{Typeflag: tar.TypeReg, Name: "a", Size: 4096})
	for name, data := range map[string][]byte{
		"not gzip":  []byte("plain text"),
		"truncated": archive[:len(archive)/2],
	} {
		t.Run(name, func(t *testing.T) {
			if err := Unpack(bytes.NewReader(data), t.TempDir(), DefaultLimits); !IsInvalidArchive(err) {
				t.Errorf("Unpack error = %v, want ErrInvalidArchive", err)
			}
		})
	}
}

func TestUnpack_ReaderFailureIsNotBlamedOnTheArchive(t *testing.T) {
	archive := craft(t, &tar.Header{Typeflag: tar.TypeReg, Name: "a", Size: 4096})
	boom := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(archive[:len(archive)/2]), &failingReader{err: boom})
	err := Unpack(r, t.TempDir(), DefaultLimits)
	if !errors.Is(err, boom) || IsInvalidArchive(err) {
		t.Errorf("Unpack error = %v, want the reader's error", err)
	}
}

type failingReader struct{ err error }

func (f *failingReader) Read([]byte) (int, error) { return 0, f.err }
