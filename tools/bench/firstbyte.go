//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
)

// -mode firstbyte: scale-from-zero latency. A job is submitted with `mlcompute job submit
// --stream` to a cluster at zero nodes and timed from the CLI's start to the first byte it
// prints, against the same command run directly (sh -c 'echo hello'), interleaved run by
// run in one engine. The engine is started the way the CLI starts it (the embedded engine
// of a fresh MLCOMPUTE_HOME); the workspace and cluster are made through the API, so the
// mode needs no terraform.
//
// The command is `date +%s%N` (run directly for the baseline), so its output says when
// it was written. Each run is broken down into the steps of its path from timestamps the
// path records anyway (nothing is instrumented for the bench): the job's submitted_at;
// node.json's created (the driver's Create begins); the agent's started_at (its process
// runs and holds its directory's lock); the agent's and the engine's log lines "node agent
// serving" and "node ready" (millisecond stamps); the task's task.json started_at (the
// agent got the request to start it); the time date printed; and the moment the CLI
// printed it. The cluster releases an idle node after fbIdle, which leaves time to read
// them.

const (
	fbWorkspace = "bench-firstbyte"
	fbCompute   = "cpu"
	fbIdle      = "PT2S"
)

// fbStep is one step of the path to the first byte: the time from one mark to the next.
type fbStep struct {
	Name     string
	From, To string // marks
}

// The marks, in path order, and the steps between them.
const (
	markCLIStart  = "cli started"
	markSubmitted = "job submitted"
	markNodeRec   = "node record written"
	markAgentUp   = "agent runs, dir locked"
	markAgentSock = "agent serving"
	markReady     = "engine: node ready"
	markTaskReq   = "agent: task start asked"
	markOutput    = "task wrote its output"
	markPrinted   = "printed by the CLI"
)

var fbSteps = []fbStep{
	{"CLI start, connect, submit", markCLIStart, markSubmitted},
	{"scale-up decided, driver Create", markSubmitted, markNodeRec},
	{"agent exec and runtime start", markNodeRec, markAgentUp},
	{"agent load and listen", markAgentUp, markAgentSock},
	{"engine sees the node ready", markAgentSock, markReady},
	{"engine places the job, asks for the task", markReady, markTaskReq},
	{"task spawned, runs to its write", markTaskReq, markOutput},
	{"engine reads, streams; CLI prints", markOutput, markPrinted},
}

// runFirstByte measures scale-from-zero first-byte latency and prints its tables.
func runFirstByte(ctx context.Context, o options) (err error) {
	e, err := startBenchEngine(ctx, o, "mlcompute-firstbyte-")
	if err != nil {
		return err
	}
	defer func() {
		if serr := e.stop(o.keepDir); err == nil {
			err = serr
		}
	}()
	c, cli, env, home := e.c, e.cli, e.env, e.home
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: fbWorkspace}); err != nil {
		return err
	}
	if _, err := c.CreateCompute(ctx, fbWorkspace, api.ComputeSpec{
		Name: fbCompute, Type: api.TypeComputeCluster, VMSize: "Standard_DS1_v2",
		ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 1, ScaleDownNodesAfterIdleDuration: fbIdle},
	}); err != nil {
		return err
	}
	runs := max(o.runs, 5)
	var job, direct []time.Duration
	steps := make([][]time.Duration, len(fbSteps))
	// One untimed run first: the page cache now holds the binaries, as for a user.
	for r := -1; r < runs; r++ {
		if err := waitNoNodes(ctx, c); err != nil {
			return err
		}
		start, first, out, err := firstByteAt(ctx, env, cli, "job", "submit", "--workspace", fbWorkspace, "--compute", fbCompute, "--stream", "--", "date", "+%s%N")
		if err != nil {
			return fmt.Errorf("firstbyte: job %d: %w", r, err)
		}
		marks, err := pathMarks(ctx, c, home)
		if err != nil {
			return fmt.Errorf("firstbyte: run %d: %w", r, err)
		}
		if marks[markOutput], err = epochNanos(out); err != nil {
			return fmt.Errorf("firstbyte: run %d: %w", r, err)
		}
		marks[markCLIStart], marks[markPrinted] = start, first
		ds, dstart, _, err := firstByteAt(ctx, env, "date", "+%s%N")
		if err != nil {
			return err
		}
		if r < 0 {
			continue
		}
		job = append(job, first.Sub(start))
		direct = append(direct, dstart.Sub(ds))
		var line []string
		for i, s := range fbSteps {
			d := marks[s.To].Sub(marks[s.From])
			steps[i] = append(steps[i], d)
			line = append(line, fmt.Sprintf("%.1f", ms(d)))
		}
		fmt.Fprintf(os.Stderr, "firstbyte run %d/%d: job %.1f ms, direct %.1f ms, steps %v\n", r+1, runs, ms(job[r]), ms(direct[r]), line)
	}
	return printFirstByte(job, direct, steps)
}

// printFirstByte prints the job against the direct command (median of the per-run ratios)
// and the median of each step.
func printFirstByte(job, direct []time.Duration, steps [][]time.Duration) error {
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "latency to first byte of output\tmedian (ms)\truns (ms)\tratio [min-max]\tbaseline")
	fmt.Fprintf(w, "local process (date +%%s%%N)\t%.1f\t%s\t\t\n", ms(median(direct)), msList(direct))
	r := ratios(job, direct)
	fmt.Fprintf(w, "job on a cluster at 0 nodes\t%.1f\t%s\t%.1fx [%.1f-%.1f]\tlocal process\n", ms(median(job)), msList(job),
		medianFloat(r), slices.Min(r), slices.Max(r))
	fmt.Fprintf(w, "job minus local process\t%.1f\t\t\t\n", ms(median(job)-median(direct)))
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "step of the job's path\tfrom\tto\tmedian (ms)\truns (ms)")
	for i, s := range fbSteps {
		fmt.Fprintf(w, "%s\t%s\t%s\t%.1f\t%s\n", s.Name, s.From, s.To, ms(median(steps[i])), msList(steps[i]))
	}
	return w.Flush()
}

// pathMarks reads the marks the last job left: its submission time from the engine, and
// the local node's records and logs. The node is still there (idle until fbIdle).
func pathMarks(ctx context.Context, c *client.Client, home string) (map[string]time.Time, error) {
	jobs, err := c.ListJobs(ctx, fbWorkspace)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, errors.New("the engine lists no job")
	}
	marks := map[string]time.Time{markSubmitted: jobs[0].SubmittedAt}
	node, err := onlyDir(filepath.Join(home, daemon.NodesDir))
	if err != nil {
		return nil, fmt.Errorf("finding the node: %w", err)
	}
	var rec struct {
		Key     string    `json:"key"`
		Created time.Time `json:"created"`
	}
	if err := readJSON(filepath.Join(node, nodeagent.NodeFile), &rec); err != nil {
		return nil, err
	}
	marks[markNodeRec] = rec.Created
	info, err := nodeagent.NewClient(node).Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking the node agent: %w", err)
	}
	marks[markAgentUp] = info.StartedAt
	task, err := onlyDir(filepath.Join(node, nodeagent.TasksDir))
	if err != nil {
		return nil, fmt.Errorf("finding the task: %w", err)
	}
	var meta struct {
		StartedAt time.Time `json:"started_at"`
	}
	if err := readJSON(filepath.Join(task, nodeagent.TaskFile), &meta); err != nil {
		return nil, err
	}
	marks[markTaskReq] = meta.StartedAt
	if marks[markAgentSock], err = logTime(filepath.Join(node, nodeagent.LogFile), "node agent serving", ""); err != nil {
		return nil, err
	}
	if marks[markReady], err = logTime(filepath.Join(home, "engine.log"), "node ready", rec.Key); err != nil {
		return nil, err
	}
	return marks, nil
}

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	return nil
}

// logTime returns the time stamp of the last line of an hclog file that holds msg (and
// also, when not empty, and).
func logTime(path, msg, and string) (time.Time, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	lines := strings.Split(string(raw), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if !strings.Contains(l, ": "+msg+":") || (and != "" && !strings.Contains(l, and)) {
			continue
		}
		stamp, _, _ := strings.Cut(l, " ")
		return time.Parse("2006-01-02T15:04:05.000Z0700", stamp)
	}
	return time.Time{}, fmt.Errorf("%s has no line %q", path, msg)
}

// epochNanos parses date +%s%N's output.
func epochNanos(out string) (time.Time, error) {
	ns, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("the job printed %q, not date +%%s%%N", out)
	}
	return time.Unix(0, ns), nil
}

// onlyDir returns the one directory in dir, not counting hidden ones (the local driver's
// standby agents wait in nodes/.standby).
func onlyDir(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var found []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			found = append(found, filepath.Join(dir, e.Name()))
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("%s holds %d directories, want 1", dir, len(found))
	}
	return found[0], nil
}

// waitNoNodes waits until the cluster has released its node.
func waitNoNodes(ctx context.Context, c *client.Client) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		comp, err := c.GetCompute(ctx, fbWorkspace, fbCompute)
		if err != nil {
			return err
		}
		if len(comp.Nodes) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New("the cluster did not release its node within 2 minutes")
}

// firstByteAt runs a command to its end and returns when it started, when the first byte
// of its stdout arrived, and its stdout.
func firstByteAt(ctx context.Context, env []string, name string, args ...string) (start, first time.Time, out string, err error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return start, first, "", err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start = time.Now()
	if err := cmd.Start(); err != nil {
		return start, first, "", err
	}
	one := make([]byte, 1)
	n, readErr := stdout.Read(one)
	first = time.Now()
	rest, _ := io.ReadAll(stdout)
	out = string(one[:n]) + string(rest)
	if err := cmd.Wait(); err != nil {
		return start, first, out, fmt.Errorf("%s: %w\n%s", name, err, tail(stderr.String(), 20))
	}
	if readErr != nil {
		return start, first, out, fmt.Errorf("%s printed nothing: %w", name, readErr)
	}
	return start, first, out, nil
}
