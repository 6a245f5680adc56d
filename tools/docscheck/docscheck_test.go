package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestExtractCommandLines(t *testing.T) {
	md := strings.Join([]string{
		"Run `mlcompute job logs --follow ID` or `mlcompute_compute` (not a command).",
		"```sh",
		"MLCOMPUTE_TOKEN=x mlcompute ui   # a comment --bogus",
		"mlcompute job submit --workspace W \\",
		"  --compute C -- python train.py --epochs 3",
		"```",
		"```terraform",
		"mlcompute serve --ignored",
		"```",
		"```",
		"mlcompute serve [--nodes local|slurm]",
		"                [--idle-exit 10m]",
		"```",
	}, "\n")
	var got []string
	for _, cl := range extractCommandLines("x.md", md) {
		got = append(got, strings.Join(cl.args, " ")+"@"+strconv.Itoa(cl.line))
	}
	want := []string{
		"job logs --follow ID@1",
		"ui@3",
		"job submit --workspace W --compute C -- python train.py --epochs 3@4",
		"serve [--nodes local|slurm] [--idle-exit 10m]@11",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	tf := "# A team engine started with 'mlcompute serve --listen tcp://0.0.0.0:8443'.\n#   mlcompute job list --workspace w\n# the mlcompute engine runs it\n"
	got = nil
	for _, cl := range extractCommandLines("main.tf", tf) {
		got = append(got, strings.Join(cl.args, " "))
	}
	if want := []string{"serve --listen tcp://0.0.0.0:8443", "job list --workspace w"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("in a .tf file: got %q, want %q", got, want)
	}
}

func testTree() *cobra.Command {
	root := &cobra.Command{Use: "mlcompute"}
	root.PersistentFlags().String("endpoint", "", "")
	job := &cobra.Command{Use: "job"}
	logs := &cobra.Command{Use: "logs ID", Run: func(*cobra.Command, []string) {}}
	logs.Flags().BoolP("follow", "f", false, "")
	logs.Flags().Int("rank", 0, "")
	job.AddCommand(logs)
	root.AddCommand(job)
	return root
}

func TestParseLine(t *testing.T) {
	root := testTree()
	for _, tc := range []struct {
		line, cmd, err string
	}{
		{"job logs --endpoint unix:///s ID --rank 1 -f", "logs", ""},
		{"job logs [--rank N] ID", "logs", ""},
		{"job logs --rank=1 ID", "logs", ""},
		{"job logz ID", "", `"mlcompute job" has no command "logz"`},
		{"job logs --folow ID", "", `"mlcompute job logs" has no flag --folow`},
		{"job logs -x ID", "", `"mlcompute job logs" has no flag -x`},
		{"job logs ID -- --anything goes", "logs", ""},
		{"job COMMAND --help", "job", ""},
		{"job logs|logz ID", "", `"mlcompute job" has no command "logz"`},
	} {
		u, err := parseLine(root, strings.Fields(tc.line))
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v; want %s", tc.line, err, tc.err)
			}
			continue
		}
		if err != nil || u.cmd.Name() != tc.cmd {
			t.Errorf("%s: %v, %v; want command %s", tc.line, u.cmd, err, tc.cmd)
		}
	}
}

// The coverage check points at what cli.md lacks: a command no line runs, a flag no line
// or section names, a hidden command not said to be hidden.
func TestCLICoverage(t *testing.T) {
	root := testTree()
	hidden := &cobra.Command{Use: "node-agent", Hidden: true, Run: func(*cobra.Command, []string) {}}
	root.AddCommand(hidden)
	dir := t.TempDir()
	doc := filepath.Join(dir, "cli.md")
	text := "# CLI\n\n`--endpoint` finds the engine.\n\n### `mlcompute job logs`\n\n```sh\nmlcompute job logs ID -f\n```\n"
	if err := os.WriteFile(doc, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := readCLIDoc(root, doc)
	if err != nil {
		t.Fatal(err)
	}
	logs, _, _ := root.Find([]string{"job", "logs"})
	if !d.documentsCommand(logs) {
		t.Error("job logs is run by a line but counts as undocumented")
	}
	if !d.documentsFlag(logs, logs.Flags().Lookup("follow"), false) {
		t.Error("--follow is passed as -f but counts as undocumented")
	}
	if d.documentsFlag(logs, logs.Flags().Lookup("rank"), false) {
		t.Error("--rank is named nowhere but counts as documented")
	}
	if !d.documentsFlag(root, root.PersistentFlags().Lookup("endpoint"), true) {
		t.Error("--endpoint is named in the text but counts as undocumented")
	}
	if d.hiddenLine("`mlcompute node-agent`") {
		t.Error("node-agent counts as listed as hidden")
	}
	if got := d.where(logs); got != 5 {
		t.Errorf("a finding about job logs points at line %d; want its section's heading, 5", got)
	}
}

// A feature is named only where the CLI has its command: port forwards are a finding while
// there is no compute connect, on each line that names them, and none once it exists.
func TestUnkeptPromises(t *testing.T) {
	root := testTree()
	compute := &cobra.Command{Use: "compute"}
	compute.AddCommand(&cobra.Command{Use: "exec", Run: func(*cobra.Command, []string) {}})
	root.AddCommand(compute)
	texts := map[string]string{"docs/a.md": "Sessions (`compute exec`, Port forwards)\nkeep it awake.\nA port-forward too.\n"}
	got := unkeptPromises(root, texts, promises)
	if len(got) != 2 || got[0].line != 1 || got[1].line != 3 || !strings.Contains(got[0].msg, "mlcompute compute connect") {
		t.Fatalf("findings %v; want lines 1 and 3, naming mlcompute compute connect", got)
	}
	compute.AddCommand(&cobra.Command{Use: "connect", Run: func(*cobra.Command, []string) {}})
	if got := unkeptPromises(root, texts, promises); len(got) != 0 {
		t.Fatalf("findings %v once compute connect exists; want none", got)
	}
}

// The variables check finds reads through literals, constants of other packages and
// wrappers that pass their parameter to os.Getenv.
func TestFindEnvReads(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	write("a/a.go", "package a\n\nconst Env = \"MLCOMPUTE_FROM_CONST\"\n")
	write("main.go", `package main

import (
	"os"

	"example.com/m/a"
)

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func main() {
	_ = os.Getenv("MLCOMPUTE_LITERAL")
	_, _ = os.LookupEnv(a.Env)
	_ = envOr("MLCOMPUTE_WRAPPED", "x")
	_ = os.Getenv("HOME")
}
`)
	write("main_test.go", "package main\n\nimport \"os\"\n\nvar _ = os.Getenv(\"MLCOMPUTE_IN_A_TEST\")\n")
	t.Chdir(dir)
	reads, err := findEnvReads("example.com/m")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range reads {
		names = append(names, r.name)
	}
	if want := []string{"MLCOMPUTE_LITERAL", "MLCOMPUTE_FROM_CONST", "MLCOMPUTE_WRAPPED"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("reads %v; want %v", names, want)
	}
	if !containsWord("a MLCOMPUTE_LITERAL.", "MLCOMPUTE_LITERAL") || containsWord("MLCOMPUTE_LITERAL_DIR", "MLCOMPUTE_LITERAL") {
		t.Error("containsWord matches a prefix of a longer name, or misses the name")
	}
}

// Every family of the engine is read with its labels (client_golang shows them only in a
// descriptor's String form: a change there fails here, not silently).
func TestEngineFamilies(t *testing.T) {
	fams, err := engineFamilies()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]string{}
	for _, f := range fams {
		byName[f.name] = f.labels
	}
	if got := byName["mlcompute_node_create_duration_seconds"]; !reflect.DeepEqual(got, []string{"workspace", "compute"}) {
		t.Errorf("node create histogram labels %v", got)
	}
	if _, ok := byName["mlcompute_state_scrape_errors"]; !ok {
		t.Errorf("families %v lack mlcompute_state_scrape_errors", fams)
	}
	for name := range byName {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			t.Errorf("%s is the runtime's, not the engine's", name)
		}
	}
}

func TestMetricsTable(t *testing.T) {
	lines := strings.Split("text\n| metric | labels |\n|---|---|\n| `a_total` | `x`, `y` |\n\nafter", "\n")
	rows, header := metricsTable(lines)
	if header != 2 || rows["a_total"].line != 4 || !strings.Contains(rows["a_total"].text, "`y`") {
		t.Fatalf("header %d, rows %v", header, rows)
	}
}
