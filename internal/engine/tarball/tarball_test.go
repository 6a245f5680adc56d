//go:build unix

package tarball_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tarball"
)

type entry struct {
	typ     byte
	mode    int64
	link    string
	content string
}

func read(t *testing.T, b []byte) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s keeps its owner: %d:%d %q:%q", hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname)
		}
		content, _ := io.ReadAll(tr)
		out[hdr.Name] = entry{hdr.Typeflag, hdr.Mode & 0o777, hdr.Linkname, string(content)}
	}
}

func tree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "out")
	for _, d := range []string{"sub/deeper", "empty"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]os.FileMode{"a.txt": 0o644, "sub/run.sh": 0o755, "sub/deeper/é.bin": 0o600}
	for name, mode := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte("content of "+name), mode); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"sub/in": "../a.txt", "out": "/etc/passwd"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A directory's contents, relative to it: files with their modes, directories with a
// trailing slash (empty ones too), symlinks as they are (even pointing out), no owners.
func TestWriteADirectory(t *testing.T) {
	root := tree(t)
	var buf bytes.Buffer
	if err := tarball.Write(context.Background(), &buf, root, tarball.Options{}); err != nil {
		t.Fatal(err)
	}
	got := read(t, buf.Bytes())
	want := map[string]entry{
		"a.txt":            {tar.TypeReg, 0o644, "", "content of a.txt"},
		"empty/":           {tar.TypeDir, 0o755, "", ""},
		"out":              {tar.TypeSymlink, 0o777, "/etc/passwd", ""},
		"sub/":             {tar.TypeDir, 0o755, "", ""},
		"sub/deeper/":      {tar.TypeDir, 0o755, "", ""},
		"sub/deeper/é.bin": {tar.TypeReg, 0o600, "", "content of sub/deeper/é.bin"},
		"sub/in":           {tar.TypeSymlink, 0o777, "../a.txt", ""},
		"sub/run.sh":       {tar.TypeReg, 0o755, "", "content of sub/run.sh"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("entries:\n%v\nwant\n%v", got, want)
	}
}

// A file is one entry under its base name.
func TestWriteAFile(t *testing.T) {
	root := tree(t)
	var buf bytes.Buffer
	if err := tarball.Write(context.Background(), &buf, filepath.Join(root, "sub", "run.sh"), tarball.Options{}); err != nil {
		t.Fatal(err)
	}
	got := read(t, buf.Bytes())
	if len(got) != 1 || got["run.sh"].content != "content of sub/run.sh" || got["run.sh"].mode != 0o755 {
		t.Fatalf("entries %v; want run.sh alone", got)
	}
}

// A socket or a fifo fails the write naming the file (below Shown); with SkipSpecial it
// is left out and the rest is written.
func TestSpecialFilesAreRefusedOrSkipped(t *testing.T) {
	for _, kind := range []string{"socket", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			root := tree(t)
			special := filepath.Join(root, "sub", "x")
			switch kind {
			case "socket":
				// Unix socket paths are short: bind through a relative path.
				wd, _ := os.Getwd()
				if err := os.Chdir(filepath.Dir(special)); err != nil {
					t.Fatal(err)
				}
				ln, err := net.Listen("unix", "x")
				_ = os.Chdir(wd)
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
			case "fifo":
				if err := syscall.Mkfifo(special, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := tarball.Write(context.Background(), io.Discard, root, tarball.Options{Shown: "outputs/model"})
			if err == nil || !strings.Contains(err.Error(), "output file outputs/model/sub/x is a "+kind) {
				t.Fatalf("err = %v; want the %s refused by its name", err, kind)
			}
			var buf bytes.Buffer
			if err := tarball.Write(context.Background(), &buf, root, tarball.Options{SkipSpecial: true}); err != nil {
				t.Fatal(err)
			}
			got := read(t, buf.Bytes())
			if _, ok := got["sub/x"]; ok || len(got) != 8 {
				t.Fatalf("with SkipSpecial: %d entries, sub/x present %v; want the 8 others", len(got), ok)
			}
		})
	}
}

// A canceled write stops.
func TestWriteStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tarball.Write(ctx, io.Discard, tree(t), tarball.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
}

// A missing root is an error of its own (fs.ErrNotExist).
func TestAMissingRoot(t *testing.T) {
	err := tarball.Write(context.Background(), io.Discard, filepath.Join(t.TempDir(), "nope"), tarball.Options{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v; want not exist", err)
	}
}
