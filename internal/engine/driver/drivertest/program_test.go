package drivertest

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
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
		if !ok || got != p {
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
