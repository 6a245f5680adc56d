package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

const (
	// Every seed's computes have one size of 4 vCPUs: a CPU size, or on the seeds whose
	// machine has GPUs, a size with one.
	cpuSize   = "Standard_DS3_v2" // standardDSv2Family
	gpuSize   = "Standard_NC4as_T4_v3"
	cpuFamily = "standardDSv2Family"
	gpuFamily = "standardNCASv3_T4Family"
	vCPUs     = 4
	// minIdle is the engine's idle-shutdown minimum, small so that short idle times are allowed.
	minIdle = time.Second
	// settleLimit bounds one Settle in wall time: a wedged engine is a failure, not a hang.
	settleLimit = 20 * time.Second
	logTail     = 30
)

var workspaces = []struct {
	name  string
	quota int64
}{{"lab", 80}, {"team", 48}}

// computeModel is what the harness knows about a compute from its own actions and
// observations, independently of the engine's records.
type computeModel struct {
	ws, name  string
	instance  bool
	min, max  int64
	idleAfter time.Duration // cluster: scale_down_nodes_after_idle_duration
	// Instances: idle_time_before_shutdown (0: never), the latest activity the harness
	// saw (start, job end, session close, reported activity, user start), the sessions it
	// holds open, and the last state and operation it observed.
	idleShutdown time.Duration
	lastActivity time.Time
	sessions     int
	state        string
	lastOp       api.Operation
}

func (c *computeModel) key() string { return c.ws + "/" + c.name }

// jobModel is a job the harness submitted.
type jobModel struct {
	ws, id, compute string
	status          string
}

// taskPlan is when the harness will end a running task, and with which exit code.
type taskPlan struct {
	node, task string
	end        time.Time
	code       int
}

// world is one seeded run: the engine, its fake clock and driver, and the harness's model.
type world struct {
	seed   uint64
	rng    *rand.Rand
	ids    uint64 // IDs handed to the engine so far (kept across restarts: IDs stay unique)
	clk    *clocktesting.FakeClock
	drv    *fake.Driver
	path   string
	st     *store.Store
	e      *engine.Engine
	cancel context.CancelFunc
	// capacity is the engine's vCPU capacity (0: unlimited); some seeds set one, so that
	// Dedicated nodes preempt LowPriority ones.
	capacity int64
	// gpus are the machine's GPUs (none on most seeds); with some, computes have a GPU
	// size (vmSize, family) and nodes share the GPUs.
	gpus           []string
	vmSize, family string

	step   int
	ops    []string
	checks int64
	trace  func(string)

	computes map[string]*computeModel
	jobs     map[string]*jobModel // "<ws>/<id>"
	jobOrder []string
	// pipelines are the pipeline jobs submitted ("<ws>/<id>"), in order.
	pipelines     map[string]*pipelineModel
	pipelineOrder []string
	tasks         map[string]*taskPlan // "<node>/<task>"
	// schedules are the live schedules ("<ws>/<name>"); scheduleSeq numbers their names.
	schedules   map[string]*scheduleModel
	scheduleSeq int
}

// newWorld builds a world of seed in dir; opts adjust its fake driver (its tasks' directories
// are set here).
func newWorld(seed uint64, dir string, opts fake.Options) (*world, error) {
	opts.Dir = filepath.Join(dir, "tasks")
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	w := &world{
		seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		// Tasks get working directories, and the engine an artifacts store, so pipeline
		// steps' outputs are taken in and passed on.
		clk: clk, drv: fake.NewWithOptions(clk, opts), path: filepath.Join(dir, "state.db"),
		computes: map[string]*computeModel{}, jobs: map[string]*jobModel{}, tasks: map[string]*taskPlan{},
		pipelines: map[string]*pipelineModel{}, schedules: map[string]*scheduleModel{},
		vmSize: cpuSize, family: cpuFamily,
	}
	switch seed % 3 {
	case 0:
		w.capacity = 24 + 4*w.rng.Int64N(6) // 6 to 11 nodes of 4 vCPUs
	case 1:
		w.vmSize, w.family = gpuSize, gpuFamily
		for i := range 3 + w.rng.IntN(6) { // 3 to 8 GPUs, fewer than the nodes wanted
			w.gpus = append(w.gpus, fmt.Sprintf("gpu%d", i))
		}
	}
	if err := w.start(); err != nil {
		return nil, err
	}
	for _, ws := range workspaces {
		if _, err := w.e.CreateWorkspace(context.Background(), api.WorkspaceSpec{Name: ws.name, Quotas: map[string]int64{w.family: ws.quota}}, ""); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// newID is the engine's ID source: seeded, so a seed replays with the same node IDs (and so
// the same tie-breaks). A counter, not the rng, so IDs do not shift the operations drawn.
func (w *world) newID(prefix string) string {
	w.ids++
	return fmt.Sprintf("%s-%010x", prefix, w.ids)
}

// start opens the store and starts a manual engine on it (also after a crash).
func (w *world) start() error {
	st, err := store.Open(w.path, time.Second)
	if err != nil {
		return err
	}
	arts, err := artifacts.Open(filepath.Join(filepath.Dir(w.path), "artifacts"))
	if err != nil {
		st.Close()
		return err
	}
	e, err := engine.New(engine.Config{
		Store: st, Clock: w.clk, Driver: w.drv, DataDir: filepath.Dir(w.path), Artifacts: arts,
		CapacityVCPUs: w.capacity, GPUs: w.gpus, MinIdleShutdown: minIdle, Manual: true,
		NewID: w.newID,
	})
	if err != nil {
		st.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Start(ctx); err != nil {
		cancel()
		st.Close()
		return err
	}
	w.st, w.e, w.cancel = st, e, cancel
	return nil
}

// crash stops the engine as a crash would: nothing is cleaned up, the driver stops
// watching, and the nodes stay.
func (w *world) crash() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.st.Close()
	_ = w.drv.Close()
	w.cancel = nil
}

func (w *world) close() { w.crash() }

func (w *world) now() time.Time { return w.clk.Now().UTC() }

func (w *world) logf(format string, args ...any) {
	line := fmt.Sprintf("step %d @%s: ", w.step, w.now().Format("15:04:05.000")) + fmt.Sprintf(format, args...)
	w.ops = append(w.ops, line)
	if len(w.ops) > 4*logTail {
		w.ops = slices.Clone(w.ops[len(w.ops)-logTail:])
	}
	if w.trace != nil {
		w.trace(line)
	}
}

// violation is a broken rule, with what is needed to understand and replay it.
type violation struct {
	seed     uint64
	step     int
	rule     string
	detail   string
	opsTail  []string
	simClock time.Time
}

func (v *violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "simulation: seed %d, step %d, clock %s\ninvariant broken: %s\n  %s\nlast operations:\n",
		v.seed, v.step, v.simClock.Format(time.RFC3339Nano), v.rule, v.detail)
	for _, op := range v.opsTail {
		fmt.Fprintf(&b, "  %s\n", op)
	}
	return b.String()
}

func (w *world) fail(rule, format string, args ...any) error {
	tail := w.ops
	if len(tail) > logTail {
		tail = tail[len(tail)-logTail:]
	}
	return &violation{seed: w.seed, step: w.step, rule: rule, detail: fmt.Sprintf(format, args...), opsTail: slices.Clone(tail), simClock: w.now()}
}

// settle runs the engine's pending work, then ends the tasks whose time has come (as the
// machines would) and settles again, then checks every invariant.
func (w *world) settle() error {
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), settleLimit)
		err := w.e.Settle(ctx)
		cancel()
		if err != nil {
			return w.fail("the engine settles", "Settle: %v (a wedged engine?)", err)
		}
		if !w.finishDueTasks() {
			return w.check()
		}
	}
	return w.fail("the engine settles", "tasks kept ending at one instant")
}

// finishDueTasks plans an end for every new running task and ends those that are due. It
// reports whether it ended any.
func (w *world) finishDueTasks() bool {
	running := map[string]bool{}
	for _, nt := range byTask(w.drv.RunningTasks()) {
		running[nt] = true
		if _, ok := w.tasks[nt]; ok {
			continue
		}
		node, task, _ := strings.Cut(nt, "/")
		code := 0
		if w.rng.IntN(8) == 0 {
			code = 1
		}
		w.tasks[nt] = &taskPlan{node: node, task: task, end: w.now().Add(w.taskLength()), code: code}
	}
	ended := false
	for _, nt := range byTask(sortedKeys(w.tasks)) {
		p := w.tasks[nt]
		if !running[nt] {
			delete(w.tasks, nt)
			continue
		}
		if !w.now().Before(p.end) {
			w.logf("machine: task %s ends with %d", nt, p.code)
			w.drv.FinishTask(p.node, p.task, p.code)
			delete(w.tasks, nt)
			ended = true
		}
	}
	return ended
}

// taskLength is how long a task runs: mostly seconds to minutes, sometimes hours.
func (w *world) taskLength() time.Duration {
	switch w.rng.IntN(10) {
	case 0:
		return 0
	case 1, 2, 3:
		return time.Duration(1+w.rng.IntN(60)) * time.Second
	case 4, 5, 6, 7:
		return time.Duration(1+w.rng.IntN(20)) * time.Minute
	default:
		return time.Duration(1+w.rng.IntN(3))*time.Hour + time.Duration(w.rng.IntN(3600))*time.Second
	}
}

// run performs steps random operations, each followed by a settle and the checks.
func (w *world) run(steps int) error {
	if err := w.settle(); err != nil {
		return err
	}
	for w.step = 1; w.step <= steps; w.step++ {
		if err := w.randomOp(); err != nil {
			return err
		}
	}
	w.step = steps
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// byTask sorts "node/task" keys by task (job, attempt, rank), never by the node's ID: the
// engine draws node IDs at random, and the harness's choices must follow from the seed alone.
func byTask(keys []string) []string {
	slices.SortStableFunc(keys, func(a, b string) int {
		_, ta, _ := strings.Cut(a, "/")
		_, tb, _ := strings.Cut(b, "/")
		return strings.Compare(ta, tb)
	})
	return keys
}
