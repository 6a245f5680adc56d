//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
)

// The crash suite (issue "safe under crashes"): each round SIGKILLs the engine at a random
// moment of a user's operation (an apply, job runs, an endpoint rollout, a destroy, the
// intake of a job's output, crash_intake_test.go; a pipeline, crash_pipeline_test.go; jobs
// in a container image, container_test.go),
// lets it come back (the embedded engine is started again by the next provider or CLI call;
// `mlcompute serve` is started again by the test after a random downtime, while the
// provider and the CLI wait for it), and then checks the invariants:
//
//   - every resource in Terraform's state exists once in the engine, and nothing else does;
//   - a re-run apply changes nothing (plan -detailed-exitcode is 0);
//   - clusters are at or above their minimum;
//   - the node agents are the engine's nodes, node for node, and after destroy no process
//     of the data dir is left;
//   - the instance runs again and the endpoint is rolled out, drained and on its split;
//   - every finished job has its exit code and its full log, each line once, in order;
//   - a pipeline ends Completed with every step run once and its outputs passed on by
//     digest, no step left Running;
//   - a job killed while its output is taken in ends Completed with its whole output (the
//     download byte-identical) or Failed with nothing registered, and after the next
//     collection the store holds exactly the blobs registered outputs reference.
//
// Half the kills in the middle of an operation are followed by a second one while the new
// engine recovers from the first.
//
// Rounds take the scenarios in turn, and a scenario's mode alternates from one pass over
// the scenarios to the next, starting from a mode the seed picks. `make test` runs one pass
// (8 rounds, the default: every scenario once, half of them embedded and half served,
// which half the seed decides), to keep its time; `make test-crash` runs 50 (every scenario
// in both modes, several times). A failure names its round's seed; MLCOMPUTE_CRASH_SEED=S
// replays the rounds.

type crashMode string

const (
	crashEmbedded crashMode = "embedded"
	crashServe    crashMode = "serve"
)

// crashScenario is one kind of operation the engine dies in.
type crashScenario struct {
	name string
	run  func(r *crashRound)
	// containers: the round's engine runs container images, with a containerd of its own.
	containers bool
}

var crashScenarios = []crashScenario{
	{"apply", crashDuringApply, false},
	{"jobs", crashDuringJobs, false},
	{"rollout", crashDuringRollout, false},
	{"destroy", crashDuringDestroy, false},
	{"intake", crashDuringIntake, false},
	{"pipeline", crashDuringPipeline, false},
	{"schedule", crashAroundTick, false},
	{"container-jobs", crashDuringContainerJobs, true},
}

func TestE2E_CrashRounds(t *testing.T) {
	t.Parallel()
	requireAcc(t)
	rounds := len(crashScenarios) // one pass: each scenario once
	if s := os.Getenv("MLCOMPUTE_CRASH_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("MLCOMPUTE_CRASH_ROUNDS=%q: want a positive number", s)
		}
		rounds = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MLCOMPUTE_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MLCOMPUTE_CRASH_SEED=%q: want a number", s)
		}
		seed = n
	}
	t.Logf("crash suite: %d rounds, seed %d (replay: make test-crash ROUNDS=%d SEED=%d)", rounds, seed, rounds, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	firstMode := rng.IntN(2)
	held := map[string]int{}
	for i := range rounds {
		// The scenarios in turn, each in the other mode at the next pass; the moments of the
		// kills are random.
		pass := i / len(crashScenarios)
		mode := []crashMode{crashEmbedded, crashServe}[(firstMode+pass+i)%2]
		sc := crashScenarios[i%len(crashScenarios)]
		roundSeed := rng.Uint64()
		name := fmt.Sprintf("%02d-%s-%s", i, mode, sc.name)
		midOperation, ran := false, false
		ok := t.Run(name, func(t *testing.T) {
			ran = true // a round -run filters out is not run, and t.Run reports it ok
			t.Logf("round seed %d", roundSeed)
			r := newCrashRound(t, mode, roundSeed, sc.containers)
			sc.run(r)
			r.checkNoProcessLeftAfterDestroy()
			midOperation = r.killedMidOperation
		})
		if ok && ran {
			held[string(mode)+" "+sc.name]++
			if midOperation {
				held["killed mid-operation"]++
			}
		}
	}
	t.Logf("rounds that held every invariant, by mode and scenario: %v", held)
}

// crashRound is one round: a user, the way their engine runs, and a random source.
type crashRound struct {
	*user
	mode  crashMode
	rng   *rand.Rand
	serve *exec.Cmd // the running `mlcompute serve`, in serve mode
	// serveArgs are the flags `mlcompute serve` gets besides its data dir.
	serveArgs []string
	kills     int
	// killedMidOperation: a kill landed while the operation under test ran (not after it).
	killedMidOperation bool
}

// wake makes sure an engine answers before the checks look at it: in embedded mode the
// first CLI call after a kill starts it again (when the operation itself did not).
func (r *crashRound) wake() {
	r.t.Helper()
	if r.mode == crashEmbedded {
		if out, code := r.cli("sizes", "list", "-o", "json"); code != 0 {
			r.t.Fatalf("the embedded engine did not come back: %s", out)
		}
	}
	r.waitFor("the engine answering again", 30*time.Second, func() bool { return r.enginePID() != 0 })
}

func newCrashRound(t *testing.T, mode crashMode, seed uint64, containers bool) *crashRound {
	sock := ""
	if containers {
		sock = startContainerd(t) // before newUser: its clean-up stops the engine first
	}
	r := &crashRound{user: newUser(t), mode: mode, rng: rand.New(rand.NewPCG(seed, 1))}
	if containers {
		r.env = append(r.env, "MLCOMPUTE_CONTAINERD_ADDRESS="+sock)
		r.serveArgs = []string{"--containerd-address", sock}
	}
	if mode == crashServe {
		// A configured endpoint: the provider and the CLI wait for it with backoff and
		// never start an engine of their own.
		r.env = append(r.env, "MLCOMPUTE_ENDPOINT=unix://"+filepath.Join(r.home, "engine.sock"))
		r.startServe()
		t.Cleanup(func() {
			if r.serve != nil {
				_ = r.serve.Process.Kill()
				_ = r.serve.Wait()
			}
		})
	} else if out, code := r.cli("sizes", "list", "-o", "json"); code != 0 { // starts the embedded engine
		t.Fatalf("starting the embedded engine: %s", out)
	}
	return r
}

// serveCommand is the round's `mlcompute serve`.
func (r *crashRound) serveCommand() *exec.Cmd {
	cmd := exec.Command(filepath.Join(binDir, "mlcompute"), append([]string{"serve", "--data-dir", r.home}, r.serveArgs...)...)
	cmd.Env = r.env
	return cmd
}

func (r *crashRound) startServe() {
	r.t.Helper()
	cmd := r.serveCommand()
	logFile, err := os.OpenFile(filepath.Join(r.workDir, "serve.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("starting mlcompute serve: %v", err)
	}
	r.serve = cmd
	r.waitFor("mlcompute serve answering", 20*time.Second, func() bool { return r.enginePID() == cmd.Process.Pid })
}

// crash SIGKILLs the engine and, in serve mode, starts it again after a random downtime
// (in the background: the operation under test waits for it meanwhile).
func (r *crashRound) crash() (restarted <-chan struct{}) {
	r.t.Helper()
	done := make(chan struct{})
	pid := r.enginePID()
	if pid == 0 {
		close(done)
		return done // already down (killed earlier and not asked for since)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		r.t.Fatalf("killing engine %d: %v", pid, err)
	}
	r.kills++
	if !r.waitGone(pid, 10*time.Second) {
		r.t.Fatalf("engine %d still alive after SIGKILL", pid)
	}
	r.t.Logf("engine %d killed (%s mode)", pid, r.mode)
	if r.mode == crashEmbedded {
		close(done)
		return done
	}
	_ = r.serve.Wait()
	downtime := time.Duration(100+r.rng.IntN(1400)) * time.Millisecond
	go func() {
		defer close(done)
		time.Sleep(downtime)
		cmd := r.serveCommand()
		if err := cmd.Start(); err != nil {
			r.t.Errorf("restarting mlcompute serve: %v", err)
			return
		}
		r.serve = cmd
	}()
	return done
}

// crashAgainWhileRecovering kills the engine that came back after a crash within a moment
// of its start, while it adopts, restarts and releases what the first one left: half the
// rounds that kill mid-operation do this, as flapping power or an OOM killer would. It
// waits for the next engine (the operation's retries start the embedded one; the test,
// serve) and gives up quietly when none comes, because the operation needed none.
func (r *crashRound) crashAgainWhileRecovering() {
	r.t.Helper()
	var pid int
	if !r.poll(3*time.Second, func() bool { pid = r.enginePID(); return pid != 0 }) {
		return
	}
	time.Sleep(time.Duration(r.rng.Int64N(int64(800 * time.Millisecond))))
	r.t.Logf("killing engine %d again while it recovers", pid)
	<-r.crash()
}

// during runs a command and SIGKILLs the engine at a random moment within window of its
// start; it returns the command's output and exit code once both are over.
func (r *crashRound) during(window time.Duration, name string, args ...string) (string, int) {
	r.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = r.workDir, r.env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	var restarted <-chan struct{}
	select {
	case err = <-exited: // over before the kill: the kill then hits the idle engine
		r.t.Logf("%s ended before the kill", filepath.Base(name))
		restarted = r.crash()
	case <-time.After(time.Duration(r.rng.Int64N(int64(window)))):
		r.killedMidOperation = true
		restarted = r.crash()
		if r.rng.IntN(2) == 0 {
			<-restarted
			r.crashAgainWhileRecovering()
		}
		err = <-exited
	}
	<-restarted
	r.wake()
	code := 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		r.t.Fatalf("running %s: %v", name, err)
	}
	return out.String(), code
}

// converge re-runs apply until it succeeds (an apply the crash made fail is retried once,
// as a user would), then checks that a plan shows nothing to do.
func (r *crashRound) converge(first string, firstCode int) {
	r.t.Helper()
	if firstCode != 0 {
		r.t.Logf("the apply the engine died in failed (a user re-runs it):\n%s", lastLines(first, 15))
		r.mustTerraform("apply", "-auto-approve")
	}
	out, code := r.terraform("plan", "-detailed-exitcode")
	if code != 0 {
		r.t.Fatalf("a re-run plan after the crash is not empty (exit %d):\n%s", code, out)
	}
	r.checkStateMatchesEngine()
}

// checkStateMatchesEngine: every resource in Terraform's state exists once in the engine,
// and the engine holds nothing the state does not know of.
func (r *crashRound) checkStateMatchesEngine() {
	r.t.Helper()
	raw := r.mustTerraform("show", "-json")
	var shown struct {
		Values struct {
			Root struct {
				Resources []struct {
					Type   string         `json:"type"`
					Values map[string]any `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	decodeJSON(r.t, raw, &shown)
	inState := map[string]int{}
	for _, res := range shown.Values.Root.Resources {
		if strings.HasPrefix(res.Type, "mlcompute_") {
			id, _ := res.Values["id"].(string)
			inState[id]++
		}
	}
	ctx := context.Background()
	c := r.client()
	inEngine := map[string]int{}
	workspaces, err := c.ListWorkspaces(ctx)
	if err != nil {
		r.t.Fatalf("listing workspaces: %v", err)
	}
	for _, ws := range workspaces {
		inEngine[ws.ID]++
		computes, err := c.ListComputes(ctx, ws.Name)
		if err != nil {
			r.t.Fatalf("listing computes: %v", err)
		}
		for _, cp := range computes {
			inEngine[cp.ID]++
		}
		endpoints, err := c.ListEndpoints(ctx, ws.Name)
		if err != nil {
			r.t.Fatalf("listing endpoints: %v", err)
		}
		for _, ep := range endpoints {
			inEngine[ep.ID]++
		}
		schedules, err := c.ListSchedules(ctx, ws.Name)
		if err != nil {
			r.t.Fatalf("listing schedules: %v", err)
		}
		for _, s := range schedules {
			inEngine[s.ID]++
		}
		environments, err := c.ListEnvironments(ctx, ws.Name)
		if err != nil {
			r.t.Fatalf("listing environments: %v", err)
		}
		for _, e := range environments {
			inEngine[e.ID]++
		}
	}
	for id, n := range inState {
		if n != 1 || inEngine[id] != 1 {
			r.t.Errorf("%s: %d times in state, %d times in the engine; want once in each", id, n, inEngine[id])
		}
	}
	for id := range inEngine {
		if inState[id] == 0 {
			r.t.Errorf("%s exists in the engine but not in Terraform's state (leaked by a create the crash interrupted)", id)
		}
	}
}

// checkClustersAtMinimum waits for every cluster to reach its minimum of usable nodes and
// for the node processes to be exactly the engine's nodes.
func (r *crashRound) checkClustersAtMinimum(ws string, minimums map[string]int64) {
	r.t.Helper()
	for name, min := range minimums {
		r.waitFor(fmt.Sprintf("cluster %s at or above its minimum %d", name, min), 60*time.Second, func() bool {
			cp, err := r.client().GetCompute(context.Background(), ws, name)
			return err == nil && cp.CurrentNodeCount >= min
		})
	}
	r.checkNoOrphanNodes(ws)
}

// checkNoOrphanNodes waits until the node agents running for this data dir are exactly the
// nodes the engine records (computes' nodes and endpoints' instances), node for node: no
// agent of a node the engine forgot, and no node the engine counts whose agent is dead.
func (r *crashRound) checkNoOrphanNodes(ws string) {
	r.t.Helper()
	var orphans, missing []string
	ok := r.poll(60*time.Second, func() bool {
		recorded := r.recordedNodes(ws)
		if recorded == nil {
			return false
		}
		running := map[string]bool{}
		orphans, missing = nil, nil
		for _, a := range r.nodeAgents() {
			node := a[strings.LastIndexByte(a, ' ')+1:]
			running[node] = true
			if !recorded[node] {
				orphans = append(orphans, a)
			}
		}
		for node := range recorded {
			if !running[node] {
				missing = append(missing, node)
			}
		}
		return len(orphans) == 0 && len(missing) == 0
	})
	if !ok {
		r.t.Fatalf("node agents without an engine record: %v; recorded nodes without a live agent: %v", orphans, missing)
	}
}

// recordedNodes returns the keys of the nodes the engine records, or nil when it cannot
// be asked.
func (r *crashRound) recordedNodes(ws string) map[string]bool {
	ctx := context.Background()
	nodes := map[string]bool{}
	computes, err := r.client().ListComputes(ctx, ws)
	if err != nil {
		return nil
	}
	for _, cp := range computes {
		full, err := r.client().GetCompute(ctx, ws, cp.Name)
		if err != nil {
			return nil
		}
		for _, n := range full.Nodes {
			nodes[n.ID] = true
		}
	}
	endpoints, err := r.client().ListEndpoints(ctx, ws)
	if err != nil {
		return nil
	}
	for _, ep := range endpoints {
		for _, d := range ep.Deployments {
			for _, in := range d.Instances {
				nodes[in.ID] = true
			}
		}
	}
	return nodes
}

// nodeAgents lists the node agent processes serving a node of this data dir (a standby
// agent not yet given a node is the engine's, not a node's).
func (u *user) nodeAgents() []string {
	nodes := filepath.Join(u.home, "nodes")
	var agents []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || !processAlive(atoi(e.Name())) {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || filepath.Dir(cwd) != nodes || filepath.Base(cwd) == nodeagent.StandbyDir {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), "\x00--dir") {
			agents = append(agents, e.Name()+" "+filepath.Base(cwd))
		}
	}
	return agents
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// checkNoProcessLeftAfterDestroy destroys what is left and checks that no process of the
// data dir outlives its nodes.
func (r *crashRound) checkNoProcessLeftAfterDestroy() {
	r.t.Helper()
	if r.t.Failed() {
		return
	}
	r.mustTerraform("destroy", "-auto-approve")
	if ws := r.workspaces(); len(ws) != 0 {
		r.t.Fatalf("workspaces left after destroy: %v", ws)
	}
	var left []string
	if !r.poll(30*time.Second, func() bool { left = r.processesOfHome(); return len(left) == 0 }) {
		r.t.Fatalf("processes left after destroy: %v", left)
	}
	r.t.Logf("round held every invariant (%d engine kill(s))", r.kills)
}

// poll reports whether cond became true within limit.
func (r *crashRound) poll(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); ; time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// crashConfig is the scenarios' configuration: a workspace, a cluster kept at one node,
// one that scales from zero, a compute instance, and (with endpoint) an online endpoint of
// two deployments.
func crashConfig(endpoint bool, blueVersion string, blueTraffic int) string {
	hcl := requiredProviders + `
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = "crash"
}

resource "mlcompute_compute_cluster" "warm" {
  name         = "warm"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    min_node_count                       = 1
    max_node_count                       = 2
    scale_down_nodes_after_idle_duration = "PT2S"
  }
}

resource "mlcompute_compute_cluster" "cold" {
  name         = "cold"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    min_node_count                       = 0
    max_node_count                       = 3
    scale_down_nodes_after_idle_duration = "PT2S"
  }
}
`
	hcl += `
resource "mlcompute_compute_instance" "dev" {
  name                      = "dev"
  workspace_id              = mlcompute_workspace.ws.id
  vm_size                   = "Standard_DS2_v2"
  idle_time_before_shutdown = "PT15M"
}
`
	if !endpoint {
		return hcl
	}
	deployment := func(name, version string) string {
		return fmt.Sprintf(`
    %s = {
      instance_type         = "Standard_DS2_v2"
      command               = [%q]
      environment_variables = { SCORER_NAME = %q, MODEL_VERSION = %q }
      readiness_probe       = { path = "/health", initial_delay = "PT0S", period = "PT1S" }
      liveness_probe        = { path = "/health", initial_delay = "PT0S", period = "PT1S" }
    }`, name, filepath.Join(binDir, "scorer"), name, version)
	}
	return hcl + fmt.Sprintf(`
resource "mlcompute_online_endpoint" "scoring" {
  name         = "scoring"
  workspace_id = mlcompute_workspace.ws.id
  deployments = {%s%s
  }
  traffic = { blue = %d, green = %d }
}
`, deployment("blue", blueVersion), deployment("green", "1"), blueTraffic, 100-blueTraffic)
}

var crashMinimums = map[string]int64{"warm": 1, "cold": 0}

// checkServing waits until what the state declares runs again after the crash: the instance
// is Running, and each endpoint is Succeeded with every deployment at its instance count,
// every instance of the current generation and ready (the older ones drained and gone), and
// the router's live split equal to the declared traffic.
func (r *crashRound) checkServing(ws string) {
	r.t.Helper()
	ctx := context.Background()
	var why string
	ok := r.poll(60*time.Second, func() bool {
		in, err := r.client().GetCompute(ctx, ws, "dev")
		if err != nil || in.State != api.InstanceRunning {
			why = fmt.Sprintf("instance dev: %v (%v)", in, err)
			return false
		}
		eps, err := r.client().ListEndpoints(ctx, ws)
		if err != nil {
			why = err.Error()
			return false
		}
		for _, ep := range eps {
			if ep.ProvisioningState != api.ProvisioningSucceeded {
				why = fmt.Sprintf("endpoint %s: %s %s", ep.Name, ep.ProvisioningState, ep.Error)
				return false
			}
			for name, d := range ep.Deployments {
				if d.ReadyInstances != d.InstanceCount || int64(len(d.Instances)) != d.InstanceCount {
					why = fmt.Sprintf("deployment %s: %d ready of %d instances %+v; want %d", name, d.ReadyInstances, len(d.Instances), d.Instances, d.InstanceCount)
					return false
				}
				for _, in := range d.Instances {
					if in.Generation != d.Generation {
						why = fmt.Sprintf("deployment %s: instance %s of generation %d, current %d", name, in.ID, in.Generation, d.Generation)
						return false
					}
				}
			}
			for name, pct := range ep.Traffic {
				if ep.LiveTraffic[name] != pct {
					why = fmt.Sprintf("endpoint %s: live traffic %v, declared %v", ep.Name, ep.LiveTraffic, ep.Traffic)
					return false
				}
			}
		}
		return true
	})
	if !ok {
		r.t.Fatalf("not serving again 60s after the crash: %s", why)
	}
}

// crashDuringApply: the engine dies while terraform creates the workspace, the clusters,
// the instance and the endpoint.
func crashDuringApply(r *crashRound) {
	r.writeConfig(crashConfig(true, "1", 100))
	out, code := r.during(2*time.Second, terraform, "apply", "-auto-approve", "-no-color")
	r.converge(out, code)
	r.checkServing("crash")
	r.checkClustersAtMinimum("crash", crashMinimums)
}

// crashDuringDestroy: the engine dies while terraform destroys nodes' clusters; a re-run
// destroy finishes the job (checkNoProcessLeftAfterDestroy).
func crashDuringDestroy(r *crashRound) {
	r.writeConfig(crashConfig(false, "", 0))
	r.mustTerraform("apply", "-auto-approve")
	r.checkClustersAtMinimum("crash", crashMinimums)
	out, code := r.during(700*time.Millisecond, terraform, "destroy", "-auto-approve", "-no-color")
	if code != 0 {
		r.t.Logf("the destroy the engine died in failed (a user re-runs it):\n%s", lastLines(out, 15))
	}
	// What the state still holds exists in the engine, and nothing else does.
	r.checkStateMatchesEngine()
}

// crashDuringRollout: the engine dies while terraform rolls a deployment out and moves
// traffic.
func crashDuringRollout(r *crashRound) {
	r.writeConfig(crashConfig(true, "1", 100))
	r.mustTerraform("apply", "-auto-approve")
	r.writeConfig(crashConfig(true, "2", 50))
	out, code := r.during(2500*time.Millisecond, terraform, "apply", "-auto-approve", "-no-color")
	r.converge(out, code)
	r.checkServing("crash")
	ep := r.waitEndpoint("crash", "scoring", api.ProvisioningSucceeded)
	if v := ep.Deployments["blue"].EnvironmentVariables["MODEL_VERSION"]; v != "2" || ep.Traffic["blue"] != 50 {
		r.t.Fatalf("after the rollout: blue MODEL_VERSION %q traffic %v; want 2 and blue 50", v, ep.Traffic)
	}
	keys, err := r.client().GetEndpointKeys(context.Background(), "crash", "scoring")
	if err != nil {
		r.t.Fatal(err)
	}
	for i := range 20 {
		if s := score(r.t, ep.ScoringURI, keys.PrimaryKey, "", "", ""); s.status != 200 {
			r.t.Fatalf("scoring request %d after the crash: status %d", i, s.status)
		}
	}
	r.checkClustersAtMinimum("crash", crashMinimums)
}

// crashDuringJobs: the engine dies while jobs run (and while they are queued and their
// nodes start); every job ends with its own exit code and every line it printed.
func crashDuringJobs(r *crashRound) { crashJobsIn(r, "") }

// crashJobsIn kills the engine while three jobs run in environment env ("": none; "image":
// a container environment from images/train.tar), and checks each ends with its exit code
// and its whole log.
func crashJobsIn(r *crashRound, env string) {
	config := crashConfig(false, "", 0)
	if env != "" {
		config += `
resource "mlcompute_environment" "image" {
  name         = "image"
  workspace_id = mlcompute_workspace.ws.id
  container    = { image_archive = "images/train.tar" }
}
`
	}
	r.writeConfig(config)
	r.mustTerraform("apply", "-auto-approve")
	const lines = 40
	type submitted struct {
		id   string
		exit int
	}
	var jobs []submitted
	for i := range 3 {
		exit := r.rng.IntN(3) // 0, 1 or 2
		compute := []string{"warm", "cold"}[i%2]
		cmd := fmt.Sprintf("for i in $(seq 1 %d); do echo job-%d-line-$i; sleep 0.0%d; done; exit %d", lines, i, 1+r.rng.IntN(5), exit)
		args := []string{"job", "submit", "--workspace", "crash", "--compute", compute}
		if env != "" {
			args = append(args, "--environment", env)
		}
		out, code := r.cli(append(args, "--", "sh", "-c", cmd)...)
		if code != 0 {
			r.t.Fatalf("submit: %s", out)
		}
		jobs = append(jobs, submitted{strings.TrimSpace(out), exit})
	}
	time.Sleep(time.Duration(r.rng.Int64N(int64(2 * time.Second))))
	r.killedMidOperation = true
	<-r.crash()
	if r.rng.IntN(2) == 0 {
		r.wake() // the CLI starts the embedded engine only when asked
		r.crashAgainWhileRecovering()
	}
	for i, j := range jobs {
		var got api.Job
		r.waitFor("job "+j.id+" finished", 90*time.Second, func() bool {
			out, code := r.cli("job", "show", "--workspace", "crash", j.id, "-o", "json")
			if code != 0 {
				return false
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				r.t.Fatalf("job show: %q: %v", out, err)
			}
			return api.Terminal(got.Status)
		})
		if got.ExitCode == nil || *got.ExitCode != j.exit {
			r.t.Errorf("job %s: status %s, exit code %v; want exit %d", j.id, got.Status, got.ExitCode, j.exit)
		}
		logs, code := r.cli("job", "logs", "--workspace", "crash", j.id)
		if code != 0 {
			r.t.Fatalf("job logs: %s", logs)
		}
		// Every line, once and in order: a crash must neither lose output nor replay it.
		var want strings.Builder
		for n := 1; n <= lines; n++ {
			fmt.Fprintf(&want, "job-%d-line-%d\n", i, n)
		}
		if logs != want.String() {
			r.t.Errorf("job %s's log is not its %d lines, each once and in order:\n%s", j.id, lines, lastLines(logs, 10))
		}
	}
	out, code := r.terraform("plan", "-detailed-exitcode")
	if code != 0 {
		r.t.Fatalf("a plan after the crash is not empty (exit %d):\n%s", code, out)
	}
	r.checkStateMatchesEngine()
	r.checkClustersAtMinimum("crash", crashMinimums)
}
