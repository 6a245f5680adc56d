//go:build unix

package nodeagent

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestWithDir(t *testing.T) {
	standby := "/data/nodes/" + StandbyDir
	line := func(args ...string) []byte { return []byte(strings.Join(args, "\x00") + "\x00") }
	cases := []struct {
		name string
		old  []byte
		want []string // nil: refused
	}{
		{"padded standby", line("mlcompute", "node-agent", "--dir", standbyArgDir(standby)),
			[]string{"mlcompute", "node-agent", "--dir", "/data/nodes/node-0a1b2c3d4e"}},
		{"equals form", line("mlcompute", "node-agent", "--dir="+standbyArgDir(standby)),
			[]string{"mlcompute", "node-agent", "--dir=/data/nodes/node-0a1b2c3d4e"}},
		{"no room", line("mlcompute", "node-agent", "--dir", standby), nil},
		{"no --dir", line("mlcompute", "node-agent", strings.Repeat(" ", 300)), nil},
	}
	for _, tc := range cases {
		got, err := withDir(tc.old, "/data/nodes/node-0a1b2c3d4e")
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: rewrote %q; want it refused", tc.name, tc.old)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(got) != len(tc.old) {
			t.Errorf("%s: %d bytes; want the old line's %d", tc.name, len(got), len(tc.old))
		}
		if args := strings.Split(strings.TrimRight(string(got), "\x00"), "\x00"); strings.Join(args, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: %q; want %q", tc.name, args, tc.want)
		}
	}
}

func TestArgRange(t *testing.T) {
	// A command name with spaces and a parenthesis, then fields 3 to 52 (proc(5)).
	fields := make([]string, 50)
	for i := range fields {
		fields[i] = "0"
	}
	fields[0] = "S"
	fields[45], fields[46] = "140737488347000", "140737488347100" // fields 48 and 49
	stat := []byte("4242 (node agent) x) " + strings.Join(fields, " ") + "\n")
	start, end, err := argRange(stat)
	if err != nil || start != 140737488347000 || end != 140737488347100 {
		t.Fatalf("argRange = %d, %d, %v", start, end, err)
	}
	if _, _, err := argRange([]byte("4242 (short) S 1 2\n")); err == nil {
		t.Fatal("a short stat line was parsed")
	}
	// This process's own line: the range holds exactly its arguments.
	raw, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	start, end, err = argRange(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, a := range os.Args {
		want += len(a) + 1
	}
	if int(end-start) != want {
		t.Fatalf("own argument range is %d bytes; os.Args take %d", end-start, want)
	}
}

// BenchmarkCommandLineRewrite measures what an assigned standby agent spends on naming
// its node: the stat read and the memory read and write (here of the unchanged line).
func BenchmarkCommandLineRewrite(b *testing.B) {
	for b.Loop() {
		raw, err := os.ReadFile("/proc/self/stat")
		if err != nil {
			b.Fatal(err)
		}
		start, end, err := argRange(raw)
		if err != nil {
			b.Fatal(err)
		}
		mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, end-start)
		if _, err := mem.ReadAt(buf, start); err != nil {
			b.Fatal(err)
		}
		if _, err := mem.WriteAt(buf, start); err != nil {
			b.Fatal(err)
		}
		mem.Close()
	}
}

// A task in a container runs the agent's binary as the agent was run: the provider's binary
// takes the CLI's commands after "engine", the CLI's directly, and a test binary alone.
func TestContainerRunArgvFollowsTheAgentsCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"/p/terraform-provider-mlcompute", "engine", "node-agent", "--dir", "/d"}, []string{"/bin/x", "engine", ContainerRunCommand}},
		{[]string{"mlcompute", "node-agent", "--dir", "/d"}, []string{"/bin/x", ContainerRunCommand}},
		{[]string{"nodeagent.test", "-test.run=X"}, []string{"/bin/x", ContainerRunCommand}},
	} {
		if got := containerRunArgv("/bin/x", tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q; want %q", tc.args, got, tc.want)
		}
	}
}
