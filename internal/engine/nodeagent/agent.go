// Package nodeagent is the process that is a local node. The local driver starts one agent
// per node, detached in its own session, as `<binary> node-agent --dir <node dir>`. The
// agent holds an exclusive flock on <dir>/agent.lock (a node never runs twice), writes
// <dir>/agent.pid and serves a small HTTP JSON API on <dir>/agent.sock (mode 0600): start a
// task (idempotent by key), task state, output, kill, a long-poll wait that answers when a
// task ends, and info.
//
// Every task runs in its own process group in <dir>/tasks/<key>/work with its output
// appended to output.log. The agent is the wrapper that records each task's pgid when it
// starts and its exit status (exit_code, written atomically) when it ends, so an engine
// restart loses nothing. On SIGTERM or SIGINT the agent kills every task's process group,
// records their exit codes and exits 0. An agent that starts in a directory where a
// previous agent was SIGKILLed kills the tasks that agent left running and records 137 for
// them: nothing is orphaned.
//
// The Client type and the wire types are shared with the local driver.
package nodeagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

const (
	// lockWait is how long a starting agent retries a busy lock: the local driver holds
	// it for a moment while it cleans up after a dead agent.
	lockWait = 2 * time.Second
	// shutdownGrace bounds how long a stopping agent waits for open requests.
	shutdownGrace = 2 * time.Second
)

// Run is the node agent's main: it serves the node in dir until ctx ends or the process
// gets SIGTERM or SIGINT, then kills every task, records their exit codes, removes its
// socket and returns nil. It returns ErrAgentRunning when another agent serves dir.
func Run(ctx context.Context, dir string, logger hclog.Logger) error {
	return run(ctx, dir, logger, clock.RealClock{})
}

func run(ctx context.Context, dir string, logger hclog.Logger, clk clock.WithTicker) error {
	ready := readyFile()
	if ready != nil {
		// Closed on every path out, so the starter sees EOF if the agent fails.
		defer ready.Close()
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	assign := assignFile()
	if assign != nil {
		// A standby agent: its node is named now, and the rest is as for any agent.
		var err error
		if dir, err = awaitAssignment(assign); err != nil {
			return err
		}
		if dir == "" {
			return nil // cancelled before it was needed
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("resolving node dir: %w", err)
	}
	dir = abs
	log := logger.Named("nodeagent").With("node_dir", dir)
	if assign != nil {
		// ps and pgrep show the node this agent serves, not the standby dir.
		if err := nameNodeInCommandLine(dir); err != nil {
			log.Warn("command line still names the standby dir", "error", err)
		}
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if err := os.MkdirAll(filepath.Join(dir, TasksDir), 0o700); err != nil {
		return fmt.Errorf("creating node dir: %w", err)
	}
	lock, err := lockDir(ctx, dir, clk, lockWait)
	if err != nil {
		return err
	}
	defer lock.Close() // releases the flock

	pidPath := filepath.Join(dir, PidFile)
	if err := writeLiveInt(pidPath, os.Getpid()); err != nil {
		return err
	}
	nodeEnv, err := readNodeEnv(dir)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the agent's binary: %w", err)
	}
	a := &agent{dir: dir, log: log, clk: clk, startedAt: clk.Now(), tasks: map[string]*task{}, nodeEnv: nodeEnv, containerRun: containerRunArgv(self, os.Args)}
	if err := a.load(ctx); err != nil {
		return err
	}

	removed, stopWatch, err := proc.WatchRemoved(dir)
	if err != nil {
		return err
	}
	defer stopWatch()

	loaded := len(a.tasks)
	sock := filepath.Join(dir, SocketFile)
	ln, err := listenUnix(sock)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.routes(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	if ready != nil {
		_, _ = ready.WriteString("ready\n")
		ready.Close()
		ready = nil
	}
	log.Info("node agent serving", "pid", os.Getpid(), "tasks", loaded)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
		log.Error("api server stopped", "error", serveErr)
	case <-removed:
		log.Warn("node dir deleted; stopping")
	}

	a.stopAll()
	sctx, cancel := context.WithCancel(context.Background())
	timer := clk.NewTimer(shutdownGrace)
	go func() {
		select {
		case <-timer.C():
			cancel()
		case <-sctx.Done():
		}
	}()
	_ = srv.Shutdown(sctx)
	cancel()
	timer.Stop()
	_ = os.Remove(sock)
	_ = os.Remove(pidPath)
	log.Info("node agent stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serving node api: %w", serveErr)
	}
	return nil
}

// readyFile returns the descriptor named by ReadyFDEnv, if any, and unsets the variable.
func readyFile() *os.File {
	s := os.Getenv(ReadyFDEnv)
	if s == "" {
		return nil
	}
	os.Unsetenv(ReadyFDEnv)
	fd, err := strconv.Atoi(s)
	if err != nil || fd < 3 {
		return nil
	}
	proc.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "ready")
}

// assignFile returns the descriptor named by AssignFDEnv, if any, and unsets the variable.
func assignFile() *os.File {
	s := os.Getenv(AssignFDEnv)
	if s == "" {
		return nil
	}
	os.Unsetenv(AssignFDEnv)
	fd, err := strconv.Atoi(s)
	if err != nil || fd < 3 {
		return nil
	}
	proc.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "assign")
}

// awaitAssignment waits for a standby agent's node directory (one line on f; "" at EOF,
// when the driver no longer needs it), then moves there: the working directory and the
// agent's own output (its agent.log) become the node's, as Spawn would have made them.
func awaitAssignment(f *os.File) (string, error) {
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if errors.Is(err, io.EOF) {
		return "", nil // no whole line: the driver let it go
	}
	if err != nil {
		return "", fmt.Errorf("reading the node assignment: %w", err)
	}
	dir := strings.TrimSpace(line)
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("the node assignment %q is no absolute path", dir)
	}
	if err := os.Chdir(dir); err != nil {
		return "", fmt.Errorf("entering node dir: %w", err)
	}
	logFile, err := os.OpenFile(filepath.Join(dir, LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("opening agent log: %w", err)
	}
	defer logFile.Close()
	for _, fd := range []int{1, 2} {
		if err := proc.RedirectFD(logFile, fd); err != nil {
			return "", fmt.Errorf("redirecting agent output: %w", err)
		}
	}
	return dir, nil
}

// lockDir takes the exclusive flock of dir's agent.lock, retrying for up to wait while
// another process holds it.
func lockDir(ctx context.Context, dir string, clk clock.Clock, wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening agent lock: %w", err)
	}
	deadline := clk.Now().Add(wait)
	for {
		err := proc.TryLock(f)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, proc.ErrLocked) {
			f.Close()
			return nil, fmt.Errorf("locking node dir: %w", err)
		}
		if !clk.Now().Before(deadline) {
			f.Close()
			return nil, ErrAgentRunning
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-clk.After(25 * time.Millisecond):
		}
	}
}

// recoverLockWait is how long RecoverDir waits for the lock of an agent that was just seen
// dead. A killed multi-threaded process can be seen exited (its leader a zombie, which is
// what the portable process layer waits for) while its other threads still hold its open
// files, the lock among them, for a moment. A new agent that really serves the node keeps
// the lock, and RecoverDir then returns ErrAgentRunning after this wait.
const recoverLockWait = 2 * time.Second

// RecoverDir cleans up after a dead agent: when no agent holds nodeDir's lock it kills
// every process of a task that has no recorded exit code (with their process groups),
// waits for them to exit and records 137 for those tasks. It returns how many tasks it
// recovered, and ErrAgentRunning (doing nothing) when an agent holds the lock.
func RecoverDir(ctx context.Context, nodeDir string, logger hclog.Logger) (int, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if _, err := os.Stat(nodeDir); err != nil {
		return 0, fmt.Errorf("checking node dir: %w", err)
	}
	lock, err := lockDir(ctx, nodeDir, clock.RealClock{}, recoverLockWait)
	if err != nil {
		return 0, err
	}
	defer lock.Close()
	a := &agent{dir: nodeDir, log: logger, clk: clock.RealClock{}, tasks: map[string]*task{}}
	n, err := a.recoverTasks(ctx)
	return n, err
}

// agent is the state of a running node agent.
type agent struct {
	dir       string
	log       hclog.Logger
	clk       clock.WithTicker
	startedAt time.Time
	// nodeEnv is NodeFile's env: set in every task, over the task's own variables.
	nodeEnv map[string]string
	// containerRun is how this agent's binary runs ContainerRunCommand, a task's process
	// when the task runs in a container.
	containerRun []string

	mu       sync.Mutex
	tasks    map[string]*task
	stopping bool
	running  sync.WaitGroup // one per task process not yet reaped
}

// load reads the task dirs a previous agent left, recovering orphans first.
func (a *agent) load(ctx context.Context) error {
	if _, err := a.recoverTasks(ctx); err != nil {
		return err
	}
	ents, err := os.ReadDir(filepath.Join(a.dir, TasksDir))
	if err != nil {
		return fmt.Errorf("listing tasks: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		key, err := KeyFromDirName(e.Name())
		if err != nil {
			continue
		}
		t, err := loadEndedTask(filepath.Join(a.dir, TasksDir, e.Name()), key)
		if err != nil {
			a.log.Warn("skipping unreadable task dir", "task", key, "error", err)
			continue
		}
		a.tasks[key] = t
	}
	return nil
}

// recoverTasks kills the processes of tasks without an exit code and records 137 for them.
// The caller holds the lock.
func (a *agent) recoverTasks(ctx context.Context) (int, error) {
	ents, err := os.ReadDir(filepath.Join(a.dir, TasksDir))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("listing tasks: %w", err)
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		tdir := filepath.Join(a.dir, TasksDir, e.Name())
		if _, err := os.Stat(filepath.Join(tdir, ExitCodeFile)); err == nil {
			continue
		}
		killed, err := proc.KillByEnv(ctx, TaskMarkerEnv, tdir)
		if err != nil {
			return n, fmt.Errorf("killing orphaned task %s: %w", e.Name(), err)
		}
		if err := writeInt(filepath.Join(tdir, ExitCodeFile), KilledExitCode); err != nil {
			return n, err
		}
		n++
		a.log.Warn("killed task left by a dead agent", "task", e.Name(), "processes", killed, "exit_code", KilledExitCode)
	}
	return n, nil
}

// stopAll refuses new tasks, kills every running task and waits until all are reaped and
// their exit codes recorded.
func (a *agent) stopAll() {
	a.mu.Lock()
	a.stopping = true
	tasks := make([]*task, 0, len(a.tasks))
	for _, t := range a.tasks {
		tasks = append(tasks, t)
	}
	a.mu.Unlock()
	for _, t := range tasks {
		<-t.started
		t.kill()
	}
	a.running.Wait()
}

func (a *agent) lookup(key string) (*task, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.tasks[key]
	return t, ok
}

func (a *agent) info() Info {
	a.mu.Lock()
	tasks := make([]*task, 0, len(a.tasks))
	for _, t := range a.tasks {
		tasks = append(tasks, t)
	}
	a.mu.Unlock()
	out := Info{Pid: os.Getpid(), Dir: a.dir, StartedAt: a.startedAt, Tasks: make([]TaskState, 0, len(tasks))}
	for _, t := range tasks {
		if st, ok := t.stateIfStarted(); ok {
			out.Tasks = append(out.Tasks, st)
		}
	}
	sort.Slice(out.Tasks, func(i, j int) bool { return out.Tasks[i].Key < out.Tasks[j].Key })
	return out
}

// readNodeEnv reads NodeFile's env; a node directory without NodeFile has none.
func readNodeEnv(dir string) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, NodeFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", NodeFile, err)
	}
	var n NodeEnv
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", NodeFile, err)
	}
	return n.Env, nil
}
