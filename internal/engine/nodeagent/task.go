package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// MaxOutputChunk is the most output one read returns; callers read again from the new
// offset.
const MaxOutputChunk = 1 << 20

// taskKillTimeout bounds the wait for an ended task's processes to exit after SIGKILL.
const taskKillTimeout = 10 * time.Second

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// errInvalid marks a bad request.
type errInvalid struct{ msg string }

func (e errInvalid) Error() string { return e.msg }

var errShuttingDown = errors.New("the node agent is shutting down")

// task is one process (group) the agent runs.
type task struct {
	key string
	dir string
	// container is the image the task runs in (nil: none).
	container *TaskContainer

	started  chan struct{} // closed once the start attempt is over
	startErr error         // set before started closes
	done     chan struct{} // closed once ended and the exit code recorded

	// killMu orders kill against reaping, so a SIGKILL never reaches a reused pgid.
	killMu sync.Mutex
	reaped bool

	// Guarded by stateMu.
	stateMu   sync.Mutex
	running   bool
	pid, pgid int
	exitCode  int
	startedAt time.Time
	endedAt   time.Time
}

// taskMeta is task.json.
type taskMeta struct {
	Key       string    `json:"key"`
	Command   []string  `json:"command"`
	StartedAt time.Time `json:"started_at"`
}

func (t *task) state() TaskState {
	t.stateMu.Lock()
	defer t.stateMu.Unlock()
	st := TaskState{Key: t.key, Running: t.running, ExitCode: t.exitCode, Pid: t.pid, Pgid: t.pgid, StartedAt: t.startedAt}
	if !t.running {
		end := t.endedAt
		st.EndedAt = &end
	}
	return st
}

// stateIfStarted is the state of a task whose start attempt is over.
func (t *task) stateIfStarted() (TaskState, bool) {
	select {
	case <-t.started:
		if t.startErr != nil {
			return TaskState{}, false
		}
		return t.state(), true
	default:
		return TaskState{}, false
	}
}

// kill SIGKILLs the task's process group if its leader has not been reaped yet.
func (t *task) kill() {
	t.killMu.Lock()
	defer t.killMu.Unlock()
	t.stateMu.Lock()
	pgid := t.pgid
	t.stateMu.Unlock()
	if !t.reaped && pgid > 0 {
		_ = proc.KillGroup(pgid, syscall.SIGKILL)
	}
}

// loadEndedTask reads a task a previous agent ran; its exit code must be recorded.
func loadEndedTask(dir, key string) (*task, error) {
	code, err := readInt(filepath.Join(dir, ExitCodeFile))
	if err != nil {
		return nil, err
	}
	t := &task{key: key, dir: dir, started: make(chan struct{}), done: make(chan struct{}), reaped: true, exitCode: code}
	close(t.started)
	close(t.done)
	if raw, err := os.ReadFile(filepath.Join(dir, TaskFile)); err == nil {
		var m taskMeta
		if json.Unmarshal(raw, &m) == nil {
			t.startedAt = m.StartedAt
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, ExitCodeFile)); err == nil {
		t.endedAt = fi.ModTime().UTC()
	}
	if pgid, err := readInt(filepath.Join(dir, PgidFile)); err == nil {
		t.pgid = pgid
	}
	return t, nil
}

// startTask starts req, or returns the state of the task already known under its key.
func (a *agent) startTask(ctx context.Context, req TaskRequest) (TaskState, error) {
	dir, err := TaskDir(a.dir, req.Key)
	if err != nil {
		return TaskState{}, errInvalid{err.Error()}
	}
	if len(req.Command) == 0 || req.Command[0] == "" {
		return TaskState{}, errInvalid{"the task has no command"}
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return TaskState{}, errInvalid{fmt.Sprintf("environment variable name %q is not valid", k)}
		}
	}
	if req.CodeDir != "" && !filepath.IsAbs(req.CodeDir) {
		return TaskState{}, errInvalid{"code_dir must be an absolute path"}
	}
	if err := driver.CheckTaskPaths(req.spec()); err != nil {
		return TaskState{}, errInvalid{err.Error()}
	}
	if req.Container != nil {
		if err := req.Container.check(); err != nil {
			return TaskState{}, errInvalid{err.Error()}
		}
	}
	for _, in := range req.Inputs {
		if !filepath.IsAbs(in.Src) {
			return TaskState{}, errInvalid{fmt.Sprintf("input %s: src must be an absolute path", in.Dest)}
		}
	}

	a.mu.Lock()
	if t, ok := a.tasks[req.Key]; ok {
		a.mu.Unlock()
		select {
		case <-t.started:
		case <-ctx.Done():
			return TaskState{}, ctx.Err()
		}
		if t.startErr != nil {
			return TaskState{}, t.startErr
		}
		return t.state(), nil
	}
	if a.stopping {
		a.mu.Unlock()
		return TaskState{}, errShuttingDown
	}
	t := &task{key: req.Key, dir: dir, container: req.Container, started: make(chan struct{}), done: make(chan struct{})}
	a.tasks[req.Key] = t
	a.running.Add(1)
	a.mu.Unlock()

	if err := a.launch(t, req); err != nil {
		a.mu.Lock()
		delete(a.tasks, req.Key)
		a.mu.Unlock()
		a.running.Done()
		t.startErr = err
		close(t.started)
		_ = os.RemoveAll(dir)
		a.log.Error("starting task failed", "task", req.Key, "error", err)
		return TaskState{}, err
	}
	close(t.started)
	return t.state(), nil
}

// launch prepares the task's directory and starts its process. A command that cannot be
// executed is not an error: the task ends at once with 127 (not found) or 126 (not
// executable) and the reason in its output, as a shell would report it.
func (a *agent) launch(t *task, req TaskRequest) error {
	work := filepath.Join(t.dir, WorkDir)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return fmt.Errorf("creating task dir: %w", err)
	}
	now := a.clk.Now().UTC()
	if req.CodeDir != "" {
		if err := copyTree(req.CodeDir, work); err != nil {
			return fmt.Errorf("copying code dir: %w", err)
		}
	}
	for _, in := range req.Inputs {
		dst := filepath.Join(work, filepath.FromSlash(in.Dest))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("copying input %s: %w", in.Dest, err)
		}
		if err := copyTree(in.Src, dst); err != nil {
			return fmt.Errorf("copying input %s: %w", in.Dest, err)
		}
	}
	spec := req.spec()
	if err := driver.MakeOutputDirs(work, spec.Outputs); err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(t.dir, OutputFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening task output: %w", err)
	}
	defer out.Close() // the child has its own copy

	absWork, err := filepath.Abs(work)
	if err != nil {
		return err
	}
	env := taskEnv(withEnv(req.Env, a.nodeEnv), absWork, t.dir)
	t.stateMu.Lock()
	t.startedAt = now
	t.stateMu.Unlock()

	argv := req.Command
	if req.Container != nil {
		argv = ContainerRunArgv(a.containerRun, *req.Container, t.dir, absWork, req.Command)
	}
	path, code, lookErr := lookPath(argv[0], envValue(env, "PATH"), work)
	var cmd *exec.Cmd
	if lookErr == nil {
		cmd = &exec.Cmd{
			Path:        path,
			Args:        argv,
			Dir:         work,
			Env:         env,
			Stdout:      out,
			Stderr:      out,
			SysProcAttr: proc.GroupAttr(),
		}
		if err := cmd.Start(); err != nil {
			lookErr, code = err, 126
			if errors.Is(err, fs.ErrNotExist) {
				code = 127
			}
		}
	}
	if lookErr != nil {
		if err := writeTaskMeta(t.dir, req, now); err != nil {
			return err
		}
		fmt.Fprintf(out, "mlcompute: cannot run %s: %v\n", req.Command[0], lookErr)
		a.finish(t, code)
		return nil
	}
	pid := cmd.Process.Pid
	t.stateMu.Lock()
	t.running, t.pid, t.pgid = true, pid, pid
	t.stateMu.Unlock()
	// task.json only tells a later agent when the task started, so it is written once the
	// task runs, not before: the task's first output waits for nothing but its start.
	if err := writeTaskMeta(t.dir, req, now); err != nil {
		a.log.Error("recording task start failed", "task", t.key, "error", err)
	}
	if err := writeLiveInt(filepath.Join(t.dir, PgidFile), pid); err != nil {
		// Without its pgid on disk the task could not be found after an agent crash
		// as cheaply; it still carries the marker, so run it and say so.
		a.log.Error("recording task pgid failed", "task", t.key, "error", err)
	}
	a.log.Info("task started", "task", t.key, "command", filepath.Base(req.Command[0]), "pid", pid)
	go a.reap(t, cmd)
	return nil
}

// writeTaskMeta writes task.json: the task's key, command and start time.
func writeTaskMeta(dir string, req TaskRequest, startedAt time.Time) error {
	meta, _ := json.Marshal(taskMeta{Key: req.Key, Command: req.Command, StartedAt: startedAt})
	return writeFileAtomic(filepath.Join(dir, TaskFile), meta, 0o600)
}

// reap waits for the task's leader to exit, kills what is left of its process group,
// reaps the leader and records the exit code.
func (a *agent) reap(t *task, cmd *exec.Cmd) {
	pid := cmd.Process.Pid
	_ = proc.WaitExited(pid)
	t.killMu.Lock()
	// The leader is a zombie, so its pgid cannot have been reused: take the rest of the
	// group down with it, so a task leaves nothing behind. A SIGKILL is delivered when its
	// target next runs, so the end is recorded only once every process of the task (its
	// marker is in their environment, also of those that left the group) has exited.
	_ = proc.KillGroup(pid, syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), taskKillTimeout)
	if _, err := proc.KillByEnv(ctx, TaskMarkerEnv, t.dir); err != nil {
		a.log.Warn("processes of an ended task did not exit", "task", t.key, "error", err)
	}
	cancel()
	_ = cmd.Wait()
	t.reaped = true
	t.killMu.Unlock()
	code := -1
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Signaled():
			code = 128 + int(ws.Signal())
			a.removeContainer(t)
		case ws.Exited():
			code = ws.ExitStatus()
		}
	}
	a.finish(t, code)
}

// removeContainer removes the container of a task in an image whose process was killed:
// its container-run could not delete it, and the container's processes are gone already
// (KillByEnv), so its record and snapshot go now rather than with the node.
func (a *agent) removeContainer(t *task) {
	if t.container == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), taskKillTimeout)
	defer cancel()
	rt, err := containerrt.Open(ctx, t.container.Address, t.container.EngineID)
	if err == nil {
		defer rt.Close()
		_, err = rt.Sweep(ctx, func(task string) bool { return task != t.container.Key })
	}
	if err != nil {
		a.log.Warn("removing the container of a killed task", "task", t.key, "error", err)
	}
}

// finish records the exit code of a task and wakes its waiters.
func (a *agent) finish(t *task, code int) {
	if err := writeInt(filepath.Join(t.dir, ExitCodeFile), code); err != nil {
		a.log.Error("recording exit code failed", "task", t.key, "error", err)
	}
	t.stateMu.Lock()
	t.running = false
	t.exitCode = code
	t.endedAt = a.clk.Now().UTC()
	t.stateMu.Unlock()
	close(t.done)
	a.running.Done()
	a.log.Info("task exited", "task", t.key, "exit_code", code)
}

// taskEnv is a minimal environment (PATH, HOME, LANG) with the task's own variables on
// top and the marker last.
func taskEnv(extra map[string]string, work, taskDir string) []string {
	m := map[string]string{
		"PATH": os.Getenv("PATH"),
		"HOME": work,
		"LANG": os.Getenv("LANG"),
	}
	if m["PATH"] == "" {
		m["PATH"] = defaultPath
	}
	if m["LANG"] == "" {
		m["LANG"] = "C.UTF-8"
	}
	for k, v := range extra {
		m[k] = v
	}
	m[TaskMarkerEnv] = taskDir
	m[driver.WorkDirEnv] = work
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// withEnv is task's variables with node's over them (task itself is not changed).
func withEnv(task, node map[string]string) map[string]string {
	if len(node) == 0 {
		return task
	}
	out := maps.Clone(task)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, node)
	return out
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds file as a shell would with the task's PATH; a name with a slash is
// relative to the work dir. On failure it returns the exit code a shell would use.
func lookPath(file, pathEnv, work string) (string, int, error) {
	if strings.Contains(file, "/") {
		p := file
		if !filepath.IsAbs(p) {
			p = filepath.Join(work, p)
		}
		return p, 127, checkExecutable(p)
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			continue
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(work, d)
		}
		p := filepath.Join(d, file)
		if checkExecutable(p) == nil {
			return p, 0, nil
		}
	}
	return "", 127, fmt.Errorf("%q not found in PATH", file)
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", p)
	}
	return nil
}

// copyTree copies the contents of src into dst, keeping file modes, modification times and
// symbolic links; other special files are skipped.
func copyTree(src, dst string) error {
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	var dirs []dirMode
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel != "." {
				// Writable while copying; the real mode is set at the end.
				if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
					return err
				}
				dirs = append(dirs, dirMode{target, info.Mode().Perm()})
			}
			return nil
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			return copyFile(path, target, info)
		default:
			return nil
		}
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, dirs[i].mode); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, info fs.FileInfo) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(info.Mode().Perm() | info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chtimes(dst, info.ModTime(), info.ModTime())
}

// ReadOutput returns up to MaxOutputChunk bytes of a task's output from offset on, read
// from disk (so it works whether or not the agent lives). ErrNotFound when the task dir
// does not exist; empty when there is nothing new.
func ReadOutput(nodeDir, key string, offset int64) ([]byte, error) {
	if offset < 0 {
		return nil, fmt.Errorf("reading output: negative offset %d", offset)
	}
	dir, err := TaskDir(nodeDir, key)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading output of task %s: %w", key, ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("reading output of task %s: %w", key, err)
	}
	f, err := os.Open(filepath.Join(dir, OutputFile))
	if errors.Is(err, fs.ErrNotExist) {
		return []byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading output of task %s: %w", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading output of task %s: %w", key, err)
	}
	size := min(fi.Size()-offset, MaxOutputChunk)
	if size <= 0 {
		return []byte{}, nil
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading output of task %s: %w", key, err)
	}
	return buf[:n], nil
}

// spec returns the request's inputs and outputs in the driver's types, for the checks the
// drivers share.
func (req TaskRequest) spec() driver.TaskSpec {
	spec := driver.TaskSpec{Key: req.Key}
	for _, in := range req.Inputs {
		spec.Inputs = append(spec.Inputs, driver.TaskInput{Src: in.Src, Dest: in.Dest})
	}
	for _, out := range req.Outputs {
		spec.Outputs = append(spec.Outputs, driver.TaskOutput{Path: out.Path, File: out.File})
	}
	return spec
}
