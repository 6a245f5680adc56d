package profiling

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestStartWritesWhatIsAsked(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want []string // kinds written, besides the CPU profile
	}{
		{"cpu only", Config{}, nil},
		{"everything", Config{Trace: true, Waits: true}, []string{"block", "mutex", "trace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := tc.c
			c.Dir = dir
			c.Warn = func(what string, err error) { t.Errorf("%s: %v", what, err) }
			Start(c)()

			pid := os.Getpid()
			want := []string{fmt.Sprintf("cpu-%d.pprof", pid)}
			for _, kind := range tc.want {
				ext := "pprof"
				if kind == "trace" {
					ext = "out"
				}
				want = append(want, fmt.Sprintf("%s-%d.%s", kind, pid, ext))
			}
			slices.Sort(want)
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if !slices.Equal(got, want) {
				t.Fatalf("wrote %v, want %v", got, want)
			}
			for _, name := range want {
				data, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				// A pprof profile is gzipped protobuf; a trace starts with its header.
				if filepath.Ext(name) == ".pprof" && !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
					t.Errorf("%s is not a gzipped profile (%d bytes)", name, len(data))
				}
				if filepath.Ext(name) == ".out" && !bytes.HasPrefix(data, []byte("go 1.")) {
					t.Errorf("%s is not an execution trace (%d bytes)", name, len(data))
				}
			}
		})
	}
}

func TestStartWithoutDirWritesNothing(t *testing.T) {
	Start(Config{Trace: true, Waits: true, Warn: func(what string, err error) { t.Errorf("%s: %v", what, err) }})()
}

func TestStartWarnsAndGoesOn(t *testing.T) {
	var warned []string
	Start(Config{
		Dir: filepath.Join(t.TempDir(), "missing"), Trace: true, Waits: true,
		Warn: func(what string, err error) { warned = append(warned, what) },
	})()
	want := []string{"cpu profile", "trace", "block profile", "mutex profile"}
	if !slices.Equal(warned, want) {
		t.Errorf("warned about %v, want %v", warned, want)
	}
}
