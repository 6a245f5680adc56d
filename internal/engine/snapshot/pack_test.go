package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeTree creates files under dir from a map of slash paths to contents; a path ending
// in a slash is an empty directory.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// packNames packs dir with DefaultLimits and returns the manifest, the archive and the
// names of its file and symlink entries, sorted.
func packNames(t *testing.T, dir string) (Manifest, []byte, []string) {
	t.Helper()
	var buf bytes.Buffer
	m, err := Pack(dir, &buf, DefaultLimits)
	if err != nil {
		t.Fatalf("Pack: %v", err)
	}
	var names []string
	for _, hdr := range readHeaders(t, buf.Bytes()) {
		if hdr.Typeflag != tar.TypeDir {
			names = append(names, hdr.Name)
		}
	}
	slices.Sort(names)
	return m, buf.Bytes(), names
}

func readHeaders(t *testing.T, archive []byte) []*tar.Header {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var hdrs []*tar.Header
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, hdr)
	}
}

func assertNames(t *testing.T, got []string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("archive holds\n  %q\nwant\n  %q", got, want)
	}
}

func TestPack_AmlignoreTakesPrecedenceOverGitignore(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		".gitignore":     "model.bin\n",
		".amlignore":     "data/\n",
		"train.py":       "print('hi')",
		"model.bin":      "weights",
		"data/x.csv":     "1,2",
		"sub/.gitignore": "*.py\n",
		"sub/util.py":    "pass",
	})
	m, _, names := packNames(t, dir)
	// .gitignore files, at the root or below, play no part once .amlignore exists.
	assertNames(t, names, ".amlignore", ".gitignore", "model.bin", "sub/.gitignore", "sub/util.py", "train.py")
	if m.IgnoreFile != AmlIgnore || !slices.Equal(m.IgnoreFiles, []string{".amlignore"}) {
		t.Errorf("IgnoreFile = %q, IgnoreFiles = %q; want .amlignore", m.IgnoreFile, m.IgnoreFiles)
	}
}

func TestPack_GitignoreNegationAndDirectoryPatterns(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		".gitignore":       "# build output\n*.txt\n!keep.txt\ndata/\n/outputs\n\n",
		"keep.txt":         "kept by negation",
		"notes.txt":        "ignored",
		"src/keep.txt":     "negation applies at any depth",
		"src/other.txt":    "ignored",
		"data/train.csv":   "ignored directory",
		"src/data/a.csv":   "data/ matches at any depth",
		"docs/data":        "a file named data is not a directory",
		"outputs/run1.log": "anchored pattern",
		"src/outputs/keep": "anchored pattern does not match below the root",
		"main.py":          "kept",
	})
	m, _, names := packNames(t, dir)
	assertNames(t, names, ".gitignore", "docs/data", "keep.txt", "main.py", "src/keep.txt", "src/outputs/keep")
	if m.IgnoreFile != GitIgnore || m.Files != 6 {
		t.Errorf("IgnoreFile = %q, Files = %d; want .gitignore, 6", m.IgnoreFile, m.Files)
	}
}

func TestPack_NestedIgnoreFilesApplyBelowThemselves(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		".gitignore":         "*.log\n",
		"a.tmp":              "not ignored at the root",
		"run.log":            "ignored",
		"sub/.gitignore":     "*.tmp\n!important.log\n",
		"sub/a.tmp":          "ignored by sub/.gitignore",
		"sub/important.log":  "re-included by the deeper file",
		"sub/debug.log":      "still ignored by the root file",
		"sub/deep/b.tmp":     "ignored by sub/.gitignore",
		"other/.gitignore":   "!*.log\n",
		"other/kept.log":     "re-included",
		"other/deep/too.log": "re-included",
	})
	m, _, names := packNames(t, dir)
	assertNames(t, names, ".gitignore", "a.tmp", "other/.gitignore", "other/deep/too.log", "other/kept.log",
		"sub/.gitignore", "sub/important.log")
	if want := []string{".gitignore", "other/.gitignore", "sub/.gitignore"}; !slices.Equal(m.IgnoreFiles, want) {
		t.Errorf("IgnoreFiles = %q, want %q", m.IgnoreFiles, want)
	}
}

func TestPack_SkipsGitDirectory(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		".git/HEAD":            "ref: refs/heads/main",
		".git/objects/ab/cdef": "blob",
		"vendor/lib/.git":      "gitdir: ../../.git/modules/lib",
		"vendor/lib/lib.go":    "package lib",
		"main.go":              "package main",
	})
	m, archive, names := packNames(t, dir)
	assertNames(t, names, "main.go", "vendor/lib/lib.go")
	for _, hdr := range readHeaders(t, archive) {
		if strings.Contains(hdr.Name, ".git") {
			t.Errorf("archive holds %s", hdr.Name)
		}
	}
	if m.IgnoreFile != "" {
		t.Errorf("IgnoreFile = %q, want none", m.IgnoreFile)
	}
}

func TestPack_LimitsFailBeforeWriting(t *testing.T) {
	big := strings.Repeat("x", 1500)
	cases := []struct {
		name    string
		files   map[string]string
		limits  Limits
		kind    LimitKind
		count   int64
		message string
	}{
		{
			name: "files after gitignore",
			files: map[string]string{
				".gitignore": "*.log\n", "a.py": "", "b.py": "", "data/1": "", "data/2": "", "data/3": "", "x.log": "",
			},
			limits: Limits{MaxBytes: 1 << 20, MaxFiles: 4},
			kind:   LimitFiles, count: 6,
			message: `code directory "DIR" has 6 files after applying .gitignore; the limit is 4 files: ` +
				`add an .amlignore to leave out data and outputs (largest: data/ 3 files, .gitignore 1 file, a.py 1 file)`,
		},
		{
			name:   "bytes after amlignore",
			files:  map[string]string{".amlignore": "*.log\n", "data/a.bin": big, "data/b.bin": big, "out.bin": big, "x.log": big},
			limits: Limits{MaxBytes: 2048, MaxFiles: 100},
			kind:   LimitBytes, count: 4500 + int64(len("*.log\n")),
			message: `code directory "DIR" holds 4.4 KiB after applying .amlignore; the limit is 2 KiB: ` +
				`add patterns to .amlignore to leave out data and outputs (largest: data/ 2.9 KiB, out.bin 1.5 KiB, .amlignore 6 bytes)`,
		},
		{
			name:   "no ignore file",
			files:  map[string]string{"a": "", "b": "", "c": ""},
			limits: Limits{MaxBytes: 1 << 20, MaxFiles: 2},
			kind:   LimitFiles, count: 3,
			message: `code directory "DIR" has 3 files with no .amlignore or .gitignore; the limit is 2 files: ` +
				`add an .amlignore to leave out data and outputs (largest: a 1 file, b 1 file, c 1 file)`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			var buf bytes.Buffer
			_, err := Pack(dir, &buf, tc.limits)
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("Pack error = %v, want a *LimitError", err)
			}
			if le.Kind != tc.kind || le.Count != tc.count {
				t.Errorf("Kind, Count = %s, %d; want %s, %d", le.Kind, le.Count, tc.kind, tc.count)
			}
			if got, want := err.Error(), strings.ReplaceAll(tc.message, "DIR", dir); got != want {
				t.Errorf("message\n  %s\nwant\n  %s", got, want)
			}
			if buf.Len() != 0 {
				t.Errorf("Pack wrote %d bytes before failing", buf.Len())
			}
		})
	}
}

func TestLimitError_MessageNamesNumbersAndFix(t *testing.T) {
	err := &LimitError{Dir: "src", IgnoreFile: GitIgnore, Kind: LimitFiles, Count: 2345, Limit: 2000}
	want := `code directory "src" has 2,345 files after applying .gitignore; the limit is 2,000 files: add an .amlignore to leave out data and outputs`
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err.Error(), want)
	}
	err = &LimitError{Dir: "src", IgnoreFile: GitIgnore, Kind: LimitBytes, Count: 412 << 20, Limit: DefaultLimits.MaxBytes}
	if !strings.Contains(err.Error(), "holds 412 MiB after applying .gitignore; the limit is 300 MiB") {
		t.Errorf("got %s", err.Error())
	}
}

func TestPack_Symlinks(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret": "s"})
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"lib/util.py": "pass", "d/b/x": ""})
	links := map[string]string{
		"util.py":  "lib/util.py",                    // inside: stored
		"libdir":   "lib",                            // inside, a directory: stored, not followed
		"d/up":     "..",                             // the root itself: stored
		"secret":   filepath.Join(outside, "secret"), // absolute: skipped
		"escape":   "../" + filepath.Base(outside),   // leaves dir: skipped
		"d/b/up2":  "../..",                          // resolves to the root: stored
		"chain":    "d/b/up2/..",                     // lexically inside, really outside: skipped
		"dangling": "missing/file",                   // inside, just missing: stored
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	m, archive, names := packNames(t, dir)
	assertNames(t, names, "d/b/up2", "d/b/x", "d/up", "dangling", "lib/util.py", "libdir", "util.py")
	var skipped []string
	for _, s := range m.Skipped {
		skipped = append(skipped, s.Path)
	}
	slices.Sort(skipped)
	if want := []string{"chain", "escape", "secret"}; !slices.Equal(skipped, want) {
		t.Errorf("Skipped = %v, want %v", m.Skipped, want)
	}
	for _, hdr := range readHeaders(t, archive) {
		if hdr.Name == "util.py" && (hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "lib/util.py") {
			t.Errorf("util.py stored as type %q -> %q, want a symlink to lib/util.py", hdr.Typeflag, hdr.Linkname)
		}
	}
}

func TestPack_IsDeterministicAndHashesItsOutput(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.py": "a", "pkg/b.py": "b", "pkg/c/d.txt": "d"})
	m1, a1, _ := packNames(t, dir)
	m2, a2, _ := packNames(t, dir)
	if !bytes.Equal(a1, a2) || m1.SHA256 != m2.SHA256 {
		t.Error("packing an unchanged directory twice gave different archives")
	}
	sum := sha256.Sum256(a1)
	if m1.SHA256 != hex.EncodeToString(sum[:]) || m1.ArchiveBytes != int64(len(a1)) {
		t.Errorf("manifest SHA256, ArchiveBytes = %s, %d; want the archive's", m1.SHA256, m1.ArchiveBytes)
	}
	if m1.Files != 3 || m1.Dirs != 2 || m1.Bytes != 3 {
		t.Errorf("Files, Dirs, Bytes = %d, %d, %d; want 3, 2, 3", m1.Files, m1.Dirs, m1.Bytes)
	}
}

func TestPack_MissingDirectory(t *testing.T) {
	_, err := Pack(filepath.Join(t.TempDir(), "nope"), io.Discard, DefaultLimits)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Pack error = %v, want not exist", err)
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 2345: "2,345", 1234567: "1,234,567"} {
		if got := formatCount(n); got != want {
			t.Errorf("formatCount(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{10: "10 bytes", 1024: "1 KiB", 1536: "1.5 KiB", 300 << 20: "300 MiB", 5 << 30: "5 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
