//go:build unix

package drivertest

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

func TestProgramRunsAndDecodes(t *testing.T) {
	for _, p := range []Program{
		{},
		{Output: "hello\nworld\n", ExitCode: 3},
		{Output: "it's $HOME; `x`\n", ExitCode: 0},
		{Output: "echo:", Stdin: true, ExitCode: 5},
		{Output: "started\n", Block: true},
	} {
		got, ok := Decode(p.Command())
		if !ok || !reflect.DeepEqual(got, p) {
			t.Fatalf("Decode(Command(%+v)) = %+v, %v", p, got, ok)
		}
		if p.Block {
			continue // runs until killed
		}
		cmd := exec.Command(p.Command()[0], p.Command()[1:]...)
		cmd.Stdin = strings.NewReader("ping\n")
		out, err := cmd.Output()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		want := p.Output
		if p.Stdin {
			want += "ping\n"
		}
		if string(out) != want || code != p.ExitCode {
			t.Fatalf("%+v printed %q and exited %d, want %q and %d", p, out, code, want, p.ExitCode)
		}
	}
	if _, ok := Decode([]string{"sh", "-c", "true"}); ok {
		t.Fatal("Decode accepted a command that is not a suite program")
	}
}

// A program's files: the working directory check, copies in order, a socket left behind.
func TestProgramFiles(t *testing.T) {
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "in", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "in", "sub", "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(work, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := Program{CheckWorkDir: true, Copies: []Copy{{"in/.", "out"}, {"in/sub/f", "g"}}, Socket: "out/sock", ExitCode: 2}
	got, ok := Decode(p.Command())
	if !ok || !reflect.DeepEqual(got, p) {
		t.Fatalf("Decode(Command(%+v)) = %+v, %v", p, got, ok)
	}
	run := func(workDirEnv string) (string, int) {
		cmd := exec.Command(p.Command()[0], p.Command()[1:]...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "MLCOMPUTE_WORK_DIR="+workDirEnv)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := run("/elsewhere"); code != 3 {
		t.Fatalf("with a wrong MLCOMPUTE_WORK_DIR the program exited %d (%s), want 3", code, out)
	}
	real, err := filepath.EvalSymlinks(work)
	if err != nil {
		t.Fatal(err)
	}
	if out, code := run(real); code != 2 {
		t.Fatalf("the program exited %d (%s), want 2", code, out)
	}
	for _, f := range []string{"out/sub/f", "g"} {
		if b, err := os.ReadFile(filepath.Join(work, f)); err != nil || string(b) != "data" {
			t.Fatalf("copied %s: %q, %v", f, b, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(work, "out", "sock")); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("out/sock: %v, %v; want a socket", fi, err)
	}
}

// A program listens on a free port and says so, and fails with 6 on a port held.
func TestProgramListens(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	held := ln.Addr().(*net.TCPAddr).Port
	free, err := driver.LoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    Program
		out  string
		code int
	}{
		{Program{Output: "a\n", Listen: free}, "a\n" + ListeningMarker, 0},
		{Program{Listen: held, ExitCode: 2}, "", 6},
	} {
		if got, ok := Decode(c.p.Command()); !ok || !reflect.DeepEqual(got, c.p) {
			t.Fatalf("Decode(Command(%+v)) = %+v, %v", c.p, got, ok)
		}
		out, err := exec.Command(c.p.Command()[0], c.p.Command()[1:]...).Output()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || (c.code == 0 && string(out) != c.out) {
			t.Fatalf("%+v printed %q and exited %d, want %q and %d", c.p, out, code, c.out, c.code)
		}
	}
	ln.Close()
}
