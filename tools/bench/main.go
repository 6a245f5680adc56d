//go:build unix

// Command bench times the mlcompute provider through the real terraform CLI against a
// baseline measured in the same run: terraform's built-in terraform_data resource, which
// needs no provider process at all. It prints a table of medians and ratios and asserts
// nothing about time.
//
//	go run ./tools/bench -terraform "$(scripts/tool.sh)" -bin-dir bin
//
// Each case is a configuration of -n resources. Every run applies it to empty state, plans
// again (which must show no changes) and destroys it; each operation's median over -runs
// runs is reported. The provider comes from -bin-dir through a dev_overrides CLI config
// (no terraform init), and the embedded engine runs in a fresh temporary MLCOMPUTE_HOME
// that is shut down and deleted at the end.
//
// To add a case, append to cases: a name, the case it is compared with, and its config.
// -mode firstbyte (also part of -mode all) measures scale-from-zero latency: a job submitted
// to a cluster at zero nodes, timed to the first byte of its output, against the same
// command run directly, with the steps of its path (firstbyte.go).
//
// -mode router (also part of the default -mode all) compares the engine's scoring router
// with nginx as a reverse proxy in front of the same model server, under the same wrk load
// (scoring.go), first over plain HTTP, then both over TLS on one certificate made by the
// engine's tlsconfig (tls.go; -router-pass picks one); it needs nginx and wrk, which make
// bench installs.
//
// -mode artifacts (also part of -mode all) times the store of job outputs taking in and
// giving back a 1 GiB tree of 10,000 files against cp -r of it (artifacts.go).
//
// -mode pipeline (also part of -mode all) times a 100-step fan-out/fan-in pipeline of
// steps that do next to nothing against the same commands run directly, for the engine's
// overhead per step, and the same pipeline with every step reused (pipeline.go).
//
// -mode pipeline-queue (also part of -mode all) times a pipeline's submit with no pipeline
// queued, with 1,000 queued and with those 1,000 canceled (pipeline_queue.go).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// benchCase is one configuration to time.
type benchCase struct {
	// Name labels the case in the table and names its working directory.
	Name string
	// Baselines name the cases this one's ratios are computed against (none for a baseline).
	Baselines []string
	// Config returns the HCL of n resources.
	Config func(n int) string
}

// The do-nothing provider's name in the tables: a framework provider with one resource and no
// I/O (tools/bench/nullprovider), the floor any plugin provider stands on.
const nullCase = "benchnull_resource"

// The do-nothing provider's resource with the cluster's schema (tools/bench/nullprovider,
// shaped.go): what terraform and the framework cost for that schema, without the
// provider's code.
const shapedCase = "benchnull_shaped"

// shapedConfig is the cluster configuration with resource names and types swapped: one
// resource in the workspace's place and n of another type in the clusters'. Both the
// cluster case and the shaped floor use it, so they differ only in those names.
func shapedConfig(provider, workspace, workspaceConfig, cluster string, n int) string {
	return fmt.Sprintf(`terraform {
  required_providers {
    %[1]s = { source = "mlcompute/%[1]s" }
  }
}

resource %[2]q "bench" {
%[3]s}

resource %[4]q "bench" {
  count        = %[5]d
  name         = format("cpu%%03d", count.index)
  workspace_id = %[2]s.bench.id
  vm_size      = "Standard_DS1_v2"
  scale_settings = {
    min_node_count = 0
    max_node_count = 1
  }
}
`, provider, workspace, workspaceConfig, cluster, n)
}

var cases = []benchCase{
	{
		Name: "terraform_data",
		Config: func(n int) string {
			return fmt.Sprintf(`resource "terraform_data" "bench" {
  count = %d
  input = "bench-${count.index}"
}
`, n)
		},
	},
	{
		Name:      nullCase,
		Baselines: []string{"terraform_data"},
		Config: func(n int) string {
			return fmt.Sprintf(`terraform {
  required_providers {
    benchnull = { source = "mlcompute/benchnull" }
  }
}

resource "benchnull_resource" "bench" {
  count = %d
  input = "bench-${count.index}"
}
`, n)
		},
	},
	{
		// The same configuration as the clusters', on benchnull_shaped. Its one resource in
		// the workspace's place is a benchnull_resource.
		Name:      shapedCase,
		Baselines: []string{nullCase},
		Config: func(n int) string {
			return shapedConfig("benchnull", "benchnull_resource", "  input = \"bench-clusters\"\n", shapedCase, n)
		},
	},
	{
		// One workspace holds the clusters, so this case manages n+1 resources.
		Name:      "mlcompute_compute_cluster",
		Baselines: []string{nullCase, shapedCase, "terraform_data"},
		Config: func(n int) string {
			return shapedConfig("mlcompute", "mlcompute_workspace",
				fmt.Sprintf("  name   = \"bench-clusters\"\n  quotas = { standardDSv2Family = %d }\n", n),
				"mlcompute_compute_cluster", n)
		},
	},
}

// operation is one timed terraform command of a run, in order.
type operation struct {
	Name string
	Args []string
	// NoChanges means the command must report no changes (plan -detailed-exitcode 0).
	NoChanges bool
}

var operations = []operation{
	{Name: "apply (create)", Args: []string{"apply", "-auto-approve"}},
	{Name: "plan (no changes)", Args: []string{"plan", "-detailed-exitcode"}, NoChanges: true},
	{Name: "apply (no changes)", Args: []string{"apply", "-auto-approve"}},
	{Name: "destroy", Args: []string{"destroy", "-auto-approve"}},
}

type options struct {
	// routerAutoscale serves the benchmarked deployment autoscaled (-router-autoscale).
	routerAutoscale bool
	mode            string
	// -mode artifacts
	artifactFiles int
	artifactBytes int64
	artifactRuns  int
	terraform     string
	binDir        string
	sizes         []int
	runs          int
	keepDir       bool

	// -mode router
	wrk              string
	nginx            string
	wrkThreads       int
	wrkConns         int
	wrkDuration      time.Duration
	unloadedDuration time.Duration
	cpuProfile       string
	routerPass       string
	serveBackend     bool
	serveRouter      bool
	serveFloor       string
}

// modes are the values of -mode.
var modes = []string{"all", "terraform", "firstbyte", "router", "artifacts", "pipeline", "pipeline-queue"}

func main() {
	var o options
	flag.StringVar(&o.terraform, "terraform", "terraform", "terraform (or tofu) binary")
	flag.StringVar(&o.binDir, "bin-dir", "bin", "directory holding the built terraform-provider-mlcompute and mlcompute")
	sizesFlag := flag.String("sizes", "10,100,500", "comma-separated resource counts; each is a configuration of every case")
	flag.IntVar(&o.runs, "runs", 5, "timed runs per case and size; medians are reported")
	flag.BoolVar(&o.keepDir, "keep", false, "keep the scratch directory (configs, state, engine.log) for inspection")
	flag.StringVar(&o.mode, "mode", "all", "what to measure: "+strings.Join(modes, ", ")+
		" (terraform: the provider against terraform_data; firstbyte: a job's first byte from a cluster at zero nodes (firstbyte.go); router: the scoring router against nginx)")
	flag.StringVar(&o.wrk, "wrk", "wrk", "wrk binary (-mode router)")
	flag.StringVar(&o.nginx, "nginx", "nginx", "nginx binary (-mode router)")
	flag.IntVar(&o.wrkThreads, "wrk-threads", 2, "wrk -t (-mode router)")
	flag.IntVar(&o.wrkConns, "wrk-connections", 32, "wrk -c; also the router's max concurrent requests per instance and nginx's upstream keep-alive pool (-mode router)")
	flag.DurationVar(&o.wrkDuration, "wrk-duration", 10*time.Second, "wrk -d of each timed run, whole seconds (-mode router)")
	flag.DurationVar(&o.unloadedDuration, "unloaded-duration", 2*time.Second,
		"wrk -d of each run of the one-request-at-a-time latency pass (wrk -t1 -c1), whole seconds; 0 skips it (-mode router)")
	flag.BoolVar(&o.routerAutoscale, "router-autoscale", false, "serve the benchmarked deployment autoscaled (scale_settings.type = target_utilization), to compare its throughput with the default (-mode router)")
	flag.StringVar(&o.cpuProfile, "router-cpuprofile", "", "write a CPU profile of the router during the loaded runs to this file, and of the TLS pass's to FILE-tls.EXT (-mode router)")
	flag.StringVar(&o.routerPass, "router-pass", "all", "which passes of -mode router: "+strings.Join(routerPasses, ", ")+
		" (plain: router and nginx over HTTP, with the floors; tls: both over TLS on one certificate from the engine's tlsconfig)")
	flag.BoolVar(&o.serveBackend, "serve-backend", false, "internal to -mode router: serve the model server on loopback until stdin closes")
	flag.BoolVar(&o.serveRouter, "serve-router", false, "internal to -mode router: serve the scoring router as stdin configures it, until stdin closes")
	flag.StringVar(&o.serveFloor, "serve-floor", "", "internal to -mode router: serve the floor proxy of a model ("+strings.Join(floorModels, ", ")+") until stdin closes")
	flag.IntVar(&o.artifactFiles, "artifact-files", 10000, "files in the tree of -mode artifacts")
	flag.Int64Var(&o.artifactBytes, "artifact-bytes", 1<<30, "bytes in the tree of -mode artifacts")
	flag.IntVar(&o.artifactRuns, "artifact-runs", 3, "timed runs of -mode artifacts")
	flag.Parse()
	for _, f := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: -sizes %q: want positive integers separated by commas\n", *sizesFlag)
			os.Exit(2)
		}
		o.sizes = append(o.sizes, n)
	}

	if o.serveBackend {
		if err := serveBackend(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "bench: model server: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if o.serveRouter {
		if err := serveRouterProcess(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "bench: router: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if o.serveFloor != "" {
		if err := serveFloorProcess(o.serveFloor, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s floor proxy: %v\n", o.serveFloor, err)
			os.Exit(1)
		}
		return
	}
	if !slices.Contains(modes, o.mode) {
		fmt.Fprintf(os.Stderr, "bench: -mode %q: must be one of %s\n", o.mode, strings.Join(modes, ", "))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if o.mode == "all" || o.mode == "terraform" {
		err = run(ctx, o)
	}
	if err == nil && (o.mode == "all" || o.mode == "firstbyte") {
		err = runFirstByte(ctx, o)
	}
	if err == nil && (o.mode == "all" || o.mode == "router") {
		err = runScoring(ctx, o)
	}
	if err == nil && (o.mode == "all" || o.mode == "artifacts") {
		err = runArtifacts(ctx, o)
	}
	if err == nil && (o.mode == "all" || o.mode == "pipeline") {
		err = runPipeline(ctx, o)
	}
	if err == nil && (o.mode == "all" || o.mode == "pipeline-queue") {
		err = runPipelineQueue(ctx, o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// bench holds one benchmark session: a scratch dir with a CLI config and an engine home.
type bench struct {
	opts      options
	terraform string
	cli       string
	dir       string
	env       []string
}

func run(ctx context.Context, o options) (err error) {
	if len(o.sizes) == 0 || o.runs < 1 {
		return errors.New("-sizes and -runs must name at least one size and one run")
	}
	b := &bench{opts: o}
	if b.terraform, err = exec.LookPath(o.terraform); err != nil {
		return fmt.Errorf("finding terraform: %w", err)
	}
	binDir, err := filepath.Abs(o.binDir)
	if err != nil {
		return err
	}
	b.cli = filepath.Join(binDir, "mlcompute")
	for _, name := range []string{"terraform-provider-mlcompute", "mlcompute"} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return fmt.Errorf("%w (run make build)", err)
		}
	}
	if b.dir, err = os.MkdirTemp("", "mlcompute-bench-"); err != nil {
		return err
	}
	defer func() {
		if cerr := b.cleanup(); err == nil {
			err = cerr
		}
	}()
	// The do-nothing provider is built from this module, like the provider under test.
	nullDir := filepath.Join(b.dir, "nullprovider")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(nullDir, "terraform-provider-benchnull"), "./tools/bench/nullprovider")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the do-nothing provider: %w\n%s", err, out)
	}
	cliConfig := filepath.Join(b.dir, "terraformrc")
	rc := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    %q = %q\n    %q = %q\n  }\n  direct {}\n}\n",
		"mlcompute/mlcompute", binDir, "mlcompute/benchnull", nullDir)
	if err := os.WriteFile(cliConfig, []byte(rc), 0o600); err != nil {
		return err
	}
	b.env = append(cleanEnv(),
		"TF_CLI_CONFIG_FILE="+cliConfig,
		"MLCOMPUTE_HOME="+filepath.Join(b.dir, "home"),
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1",
	)
	shapedSchema, err := b.writeResourceSchema(ctx, "mlcompute_compute_cluster")
	if err != nil {
		return err
	}
	b.env = append(b.env, "BENCHNULL_SHAPED_SCHEMA="+shapedSchema)

	version, _ := b.output(ctx, "", b.terraform, "version")
	fmt.Printf("%s, %d CPUs; medians of %d interleaved runs per size\n",
		strings.SplitN(version, "\n", 2)[0], runtime.NumCPU(), o.runs)

	for _, n := range o.sizes {
		if err := b.measureSize(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// writeResourceSchema writes the schema of one of the provider's resources, as `terraform
// providers schema -json` prints it, to a file for the do-nothing provider's
// benchnull_shaped, and returns the file's path.
func (b *bench) writeResourceSchema(ctx context.Context, resourceType string) (string, error) {
	dir := filepath.Join(b.dir, "schema")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	config := "terraform {\n  required_providers {\n    mlcompute = { source = \"mlcompute/mlcompute\" }\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, b.terraform, "providers", "schema", "-json")
	cmd.Dir, cmd.Env = dir, b.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // terraform warns there about dev_overrides
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("terraform providers schema -json: %w\n%s", err, tail(stderr.String(), 20))
	}
	var schemas struct {
		ProviderSchemas map[string]struct {
			ResourceSchemas map[string]json.RawMessage `json:"resource_schemas"`
		} `json:"provider_schemas"`
	}
	if err := json.Unmarshal(out, &schemas); err != nil {
		return "", fmt.Errorf("terraform providers schema -json: %w", err)
	}
	for _, p := range schemas.ProviderSchemas {
		if s, ok := p.ResourceSchemas[resourceType]; ok {
			file := filepath.Join(dir, resourceType+".json")
			return file, os.WriteFile(file, s, 0o644)
		}
	}
	return "", fmt.Errorf("terraform providers schema -json: no schema of %s", resourceType)
}

// caseDir is the working directory of one case at one size.
func (b *bench) caseDir(c benchCase, n int) string {
	return filepath.Join(b.dir, fmt.Sprintf("%s-%d", c.Name, n))
}

// measureSize times every case with n resources and prints its table.
func (b *bench) measureSize(ctx context.Context, n int) error {
	for _, c := range cases {
		dir := b.caseDir(c, n)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(c.Config(n)), 0o644); err != nil {
			return err
		}
		// Warm-up, untimed: loads the binaries and, for the provider, starts the engine.
		if _, err := b.output(ctx, dir, b.terraform, "plan", "-no-color"); err != nil {
			return fmt.Errorf("%s: warm-up plan: %w", c.Name, err)
		}
	}
	// times[case][op] holds one duration per run.
	times := make(map[string][][]time.Duration)
	for _, c := range cases {
		times[c.Name] = make([][]time.Duration, len(operations))
	}
	// Cases are interleaved within each run so that drift in machine load hits all alike,
	// and each run's ratio compares neighbours in time.
	for r := 1; r <= b.opts.runs; r++ {
		for _, c := range cases {
			var line []string
			for i, op := range operations {
				d, err := b.timed(ctx, b.caseDir(c, n), op)
				if err != nil {
					return fmt.Errorf("%s (%d): run %d: %s: %w", c.Name, n, r, op.Name, err)
				}
				times[c.Name][i] = append(times[c.Name][i], d)
				line = append(line, fmt.Sprintf("%s %.2fs", op.Name, d.Seconds()))
			}
			fmt.Fprintf(os.Stderr, "n=%d run %d/%d %-26s %s\n", n, r, b.opts.runs, c.Name, strings.Join(line, ", "))
		}
	}
	printTable(n, times)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func msList(ds []time.Duration) string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%.1f", ms(d)))
	}
	return strings.Join(out, " ")
}

// timed runs one operation and returns its wall time.
func (b *bench) timed(ctx context.Context, dir string, op operation) (time.Duration, error) {
	args := append(append([]string(nil), op.Args...), "-no-color")
	start := time.Now()
	out, err := b.output(ctx, dir, b.terraform, args...)
	elapsed := time.Since(start)
	var exit *exec.ExitError
	if op.NoChanges && errors.As(err, &exit) && exit.ExitCode() == 2 {
		return 0, fmt.Errorf("expected no changes, but the plan has some:\n%s", tail(out, 40))
	}
	if err != nil {
		return 0, err
	}
	return elapsed, nil
}

// output runs a command in dir with the bench environment and returns its combined output;
// on failure the error carries the output's tail.
func (b *bench) output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = b.env
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return buf.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, tail(buf.String(), 40))
		}
		return buf.String(), err
	}
	return buf.String(), nil
}

// cleanup destroys whatever a failed run left, stops the engine and removes the scratch
// dir (deleting the data dir would stop the engine too; shutdown is the polite way).
func (b *bench) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	var dirs []string
	for _, c := range cases {
		for _, n := range b.opts.sizes {
			dirs = append(dirs, b.caseDir(c, n))
		}
	}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		if !hasResources(filepath.Join(dir, "terraform.tfstate")) {
			continue
		}
		if _, err := b.output(ctx, dir, b.terraform, "destroy", "-auto-approve", "-no-color"); err != nil {
			errs = append(errs, fmt.Errorf("cleaning up %s: %w", name, err))
		}
	}
	if _, err := os.Stat(filepath.Join(b.dir, "home")); err == nil {
		if _, err := b.output(ctx, "", b.cli, "shutdown"); err != nil {
			errs = append(errs, fmt.Errorf("shutting the engine down: %w", err))
		}
	}
	if b.opts.keepDir {
		fmt.Fprintf(os.Stderr, "kept %s\n", b.dir)
	} else if err := os.RemoveAll(b.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// printTable prints, per operation and case, the median time with the runs' range, and
// against each baseline the median of the per-run ratios with their range (run r of a case
// against run r of its baseline, measured moments apart).
func printTable(n int, times map[string][][]time.Duration) {
	fmt.Printf("\n%d resources per configuration\n", n)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "operation\tcase\tmedian (s)\tmin-max (s)\tratio [min-max]\tbaseline")
	for i, op := range operations {
		for _, c := range cases {
			ds := times[c.Name][i]
			lo, hi := slices.Min(ds), slices.Max(ds)
			row := fmt.Sprintf("%s\t%s\t%.2f\t%.2f-%.2f", op.Name, c.Name, median(ds).Seconds(), lo.Seconds(), hi.Seconds())
			if len(c.Baselines) == 0 {
				fmt.Fprintf(w, "%s\t\t\n", row)
			}
			for j, base := range c.Baselines {
				r := ratios(ds, times[base][i])
				if j > 0 {
					row = "\t\t\t"
				}
				fmt.Fprintf(w, "%s\t%.2fx [%.2f-%.2f]\t%s\n", row, medianFloat(r), slices.Min(r), slices.Max(r), base)
			}
		}
	}
	w.Flush()
}

// ratios divides each run by the same run of the baseline.
func ratios(ds, base []time.Duration) []float64 {
	var out []float64
	for i := range min(len(ds), len(base)) {
		if base[i] > 0 {
			out = append(out, ds[i].Seconds()/base[i].Seconds())
		}
	}
	if len(out) == 0 {
		out = append(out, 0)
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cleanEnv is the environment without settings that would point the bench at another
// engine or change terraform's behaviour.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "MLCOMPUTE_ENDPOINT", name == "MLCOMPUTE_TOKEN", name == "MLCOMPUTE_HOME",
			name == "TF_CLI_CONFIG_FILE", name == "TF_LOG", name == "TF_LOG_PATH",
			strings.HasPrefix(name, "TF_CLI_ARGS"), name == "TF_DATA_DIR", name == "TF_WORKSPACE":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// hasResources reports whether a state file exists and records any resource.
func hasResources(statePath string) bool {
	data, err := os.ReadFile(statePath)
	return err == nil && bytes.Contains(data, []byte(`"mode": "managed"`))
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
