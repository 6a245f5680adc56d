package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/lazyregexp"
)

// ExitLost is the exit code Status reports for a task whose wrapper died without
// recording one (the machine rebooted, or someone killed the wrapper).
const ExitLost = -1

// MaxOutputChunk is the most Output returns in one call.
const MaxOutputChunk = 1 << 20

// killGraceSeconds is how long Kill waits after SIGTERM before SIGKILL.
const killGraceSeconds = 10

// killLimit bounds one remote kill: the wait for a starting task's pid (10 s), the grace
// period, the wait for the exit statuses (5 s), and a margin for the round trips.
const killLimit = (10 + killGraceSeconds + 5 + 5) * time.Second

// exitMissing is the status the remote scripts exit with when the task directory is absent.
const exitMissing = 44

// RemoteTask is a command to run on the machine.
type RemoteTask struct {
	// Key names the task's directory, <TaskStore.Dir>/<Key> (~/.mlcompute/tasks/<Key>): letters, digits, '.', '_'
	// and '-', not starting with '.'. Start is idempotent under it.
	Key     string
	Command []string
	// Env is added to the environment the SSH server gives the login. Values may be
	// secrets: they travel over the connection's stdin into a file only the user can read,
	// never on a command line.
	Env map[string]string
	// WorkDir is where the command starts (relative to the home directory); empty means
	// a fresh directory, ~/.mlcompute/tasks/<Key>/work. The command finds its absolute
	// path in MLCOMPUTE_WORK_DIR (driver.WorkDirEnv), and Fetch reads from it.
	WorkDir string
	// MakeDirs are created below WorkDir before the command starts (outputs' directories).
	MakeDirs []string
	// LaunchedElsewhere says the caller starts the wrapper itself, as
	// `sh <dir>/wrapper.sh <dir>` (WrapperCommand), in a container that shares the
	// machine's process namespace: Start writes the task's files and returns without
	// waiting for its pid. Until the wrapper runs, the task is running to Status (and a
	// Kill marks it cancelled, so it never starts).
	LaunchedElsewhere bool
}

// WrapperCommand is the command that runs a task's wrapper, for a task whose Start left
// the launch to its caller (RemoteTask.LaunchedElsewhere); dir is the TaskStore's Dir.
func WrapperCommand(dir, key string) []string {
	d := strings.TrimRight(dir, "/") + "/" + key
	return []string{"sh", d + "/wrapper.sh", d}
}

var (
	keyRE = lazyregexp.New(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$`)
	envRE = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func checkKey(key string) error {
	if !keyRE.MatchString(key) {
		return fmt.Errorf("invalid task key %q: use 1 to 128 letters, digits, '.', '_' or '-', not starting with '.'", key)
	}
	return nil
}

// Shell runs a sh command line: cmd with stdin as its input and its standard output
// written to stdout; it returns the standard error and the exit status. A *Client runs it
// on its machine; other drivers (slurm) run it on the engine's machine or a login node.
type Shell interface {
	RunShell(ctx context.Context, cmd string, stdin io.Reader, stdout io.Writer) (stderr []byte, code int, err error)
}

// TaskStore runs tasks under the wrapper through a Shell: Start, Status, Wait, Output, Kill.
// A task's files live in Dir/<key>; an empty Dir means ~/.mlcompute/tasks of the login.
type TaskStore struct {
	Shell Shell
	Dir   string
}

// dirLine is the shell line that sets tasks_dir, which every script uses.
func (t TaskStore) dirLine() string {
	if t.Dir == "" {
		return "tasks_dir=\"$HOME/.mlcompute/tasks\"\n"
	}
	return "tasks_dir=" + shellQuote(t.Dir) + "\n"
}

func (t TaskStore) run(ctx context.Context, cmd, script string) (stdout, stderr []byte, code int, err error) {
	return t.runOutput(ctx, cmd, script, &bytes.Buffer{})
}

func (t TaskStore) runOutput(ctx context.Context, cmd, script string, out outputBuffer) (stdout, stderr []byte, code int, err error) {
	stderr, code, err = t.Shell.RunShell(ctx, cmd, strings.NewReader(t.dirLine()+script), out)
	if err != nil {
		return nil, nil, 0, err
	}
	return out.Bytes(), stderr, code, nil
}

// tasks is the machine's task store, in ~/.mlcompute/tasks.
func (c *Client) tasks() TaskStore { return TaskStore{Shell: c} }

// Start runs TaskStore.Start on the machine, in ~/.mlcompute/tasks.
func (c *Client) Start(ctx context.Context, task RemoteTask) error { return c.tasks().Start(ctx, task) }

// Status runs TaskStore.Status on the machine.
func (c *Client) Status(ctx context.Context, key string) (running bool, exitCode int, err error) {
	return c.tasks().Status(ctx, key)
}

// Wait runs TaskStore.Wait on the machine.
func (c *Client) Wait(ctx context.Context, key string) (running bool, exitCode int, err error) {
	return c.tasks().Wait(ctx, key)
}

// RunningTasks runs TaskStore.RunningTasks on the machine.
func (c *Client) RunningTasks(ctx context.Context, prefix string) ([]string, error) {
	return c.tasks().RunningTasks(ctx, prefix)
}

// Output runs TaskStore.Output on the machine.
func (c *Client) Output(ctx context.Context, key string, offset int64) ([]byte, error) {
	return c.tasks().Output(ctx, key, offset)
}

// Kill runs TaskStore.Kill on the machine.
func (c *Client) Kill(ctx context.Context, key string) error { return c.tasks().Kill(ctx, key) }

// KillAll runs TaskStore.KillAll on the machine.
func (c *Client) KillAll(ctx context.Context, keys []string) error {
	return c.tasks().KillAll(ctx, keys)
}

// Start dials t and returns what Client.Start returns.
func Start(ctx context.Context, t Target, task RemoteTask) error {
	return withClient(ctx, t, func(c *Client) error { return c.Start(ctx, task) })
}

// Status dials t and returns what Client.Status returns.
func Status(ctx context.Context, t Target, key string) (running bool, exitCode int, err error) {
	err = withClient(ctx, t, func(c *Client) error {
		running, exitCode, err = c.Status(ctx, key)
		return err
	})
	return running, exitCode, err
}

// Output dials t and returns what Client.Output returns.
func Output(ctx context.Context, t Target, key string, offset int64) (out []byte, err error) {
	err = withClient(ctx, t, func(c *Client) error {
		out, err = c.Output(ctx, key, offset)
		return err
	})
	return out, err
}

// Kill dials t and returns what Client.Kill returns.
func Kill(ctx context.Context, t Target, key string) error {
	return withClient(ctx, t, func(c *Client) error { return c.Kill(ctx, key) })
}

func withClient(ctx context.Context, t Target, f func(*Client) error) error {
	c, err := Dial(ctx, t)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

// Start creates <Dir>/<key> on the machine and starts the task there under
// setsid, detached from the connection, and returns once the task's pid is recorded. It
// is idempotent under task.Key: if the directory exists, the task is not started again.
// The machine needs a POSIX sh and setsid (util-linux or busybox).
func (t TaskStore) Start(ctx context.Context, task RemoteTask) error {
	if err := checkKey(task.Key); err != nil {
		return fmt.Errorf("starting task: %w", err)
	}
	if len(task.Command) == 0 {
		return fmt.Errorf("starting task %s: no command", task.Key)
	}
	// The script removes itself first: sh keeps reading it through its open descriptor,
	// and the environment values it holds (often secrets) do not stay on the machine.
	var run strings.Builder
	run.WriteString("rm -f -- \"$0\"\n")
	run.WriteString("mlcompute_task=$(cd \"${0%/*}\" && pwd -P) || exit 127\n")
	keys := make([]string, 0, len(task.Env))
	for k := range task.Env {
		if !envRE.MatchString(k) {
			return fmt.Errorf("starting task %s: invalid environment variable name %q", task.Key, k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&run, "export %s=%s\n", k, shellQuote(task.Env[k]))
	}
	if task.WorkDir != "" {
		fmt.Fprintf(&run, "cd %s || exit 127\n", shellQuote(task.WorkDir))
	} else {
		run.WriteString("cd \"${0%/*}/work\" || exit 127\n")
	}
	// The working directory is recorded for Fetch, which runs after the task ended.
	run.WriteString(driver.WorkDirEnv + "=$(pwd -P) && export " + driver.WorkDirEnv + " || exit 127\n")
	run.WriteString("printf '%s\\n' \"$" + driver.WorkDirEnv + "\" > \"$mlcompute_task/" + workDirFile + "\" || exit 127\n")
	if len(task.MakeDirs) > 0 {
		run.WriteString("mkdir -p --")
		for _, dir := range task.MakeDirs {
			if err := driver.CheckTaskPath(dir); err != nil {
				return fmt.Errorf("starting task %s: %w", task.Key, err)
			}
			run.WriteString(" " + shellQuote(dir))
		}
		run.WriteString(" || exit 127\n")
	}
	run.WriteString("exec")
	for _, a := range task.Command {
		run.WriteString(" " + shellQuote(a))
	}
	run.WriteString("\n")

	delim, err := heredocDelimiter(run.String())
	if err != nil {
		return fmt.Errorf("starting task %s: %w", task.Key, err)
	}
	launch, await := launchWrapper, awaitPid
	if task.LaunchedElsewhere {
		launch, await = ":", "exit 0"
	}
	script := strings.NewReplacer("@DELIM@", delim, "@RUN@", run.String(), "@WRAPPER@", wrapperScript,
		"@LAUNCH@", launch, "@AWAIT@", await).Replace(startScript)
	_, stderr, code, err := t.run(ctx, "sh -s -- "+shellQuote(task.Key), script)
	if err != nil {
		return fmt.Errorf("starting task %s: %w", task.Key, err)
	}
	if code != 0 {
		return fmt.Errorf("starting task %s: remote start exited %d: %s", task.Key, code, strings.TrimSpace(string(stderr)))
	}
	return nil
}

// Status reads the task's state from its directory: running, or ended with an exit code
// (128+n for a task killed by signal n, ExitLost when the wrapper died without recording
// one). driver.ErrNotFound if the machine has no such task.
func (t TaskStore) Status(ctx context.Context, key string) (running bool, exitCode int, err error) {
	if err := checkKey(key); err != nil {
		return false, 0, fmt.Errorf("reading task status: %w", err)
	}
	out, stderr, code, err := t.run(ctx, "sh -s -- "+shellQuote(key), statusScript)
	if err != nil {
		return false, 0, fmt.Errorf("reading status of task %s: %w", key, err)
	}
	return parseStatus(key, out, stderr, code)
}

// Wait blocks until the task ends and returns what Status returns then. The waiting
// happens on the machine (a loop that checks the task's files), so it costs one session
// and no round trips; it returns early with an error when ctx ends or the connection drops.
func (t TaskStore) Wait(ctx context.Context, key string) (running bool, exitCode int, err error) {
	if err := checkKey(key); err != nil {
		return false, 0, fmt.Errorf("waiting for task: %w", err)
	}
	out, stderr, code, err := t.runOutput(ctx, "sh -s -- "+shellQuote(key), waitScript+statusScript, &heartbeatSkipper{})
	if err != nil {
		return false, 0, fmt.Errorf("waiting for task %s: %w", key, err)
	}
	return parseStatus(key, out, stderr, code)
}

// heartbeatSkipper keeps a wait's output without the newlines the wait loop writes before
// it, so a wait that lasts for days holds no more than the status.
type heartbeatSkipper struct{ bytes.Buffer }

func (w *heartbeatSkipper) Write(p []byte) (int, error) {
	n := len(p)
	if w.Len() == 0 {
		p = bytes.TrimLeft(p, "\n")
	}
	_, _ = w.Buffer.Write(p)
	return n, nil
}

// RunningTasks lists the keys starting with prefix of the tasks that have not ended.
func (t TaskStore) RunningTasks(ctx context.Context, prefix string) ([]string, error) {
	if prefix != "" {
		if err := checkKey(prefix); err != nil {
			return nil, fmt.Errorf("listing tasks: %w", err)
		}
	}
	out, stderr, code, err := t.run(ctx, "sh -s -- "+shellQuote(prefix), listScript)
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	if code != 0 {
		return nil, fmt.Errorf("listing tasks: remote list exited %d: %s", code, strings.TrimSpace(string(stderr)))
	}
	return strings.Fields(string(out)), nil
}

func parseStatus(key string, out, stderr []byte, code int) (running bool, exitCode int, err error) {
	switch {
	case code == exitMissing:
		return false, 0, fmt.Errorf("reading status of task %s: %w", key, driver.ErrNotFound)
	case code != 0:
		return false, 0, fmt.Errorf("reading status of task %s: remote status exited %d: %s", key, code, strings.TrimSpace(string(stderr)))
	}
	f := strings.Fields(string(out))
	switch {
	case len(f) == 1 && f[0] == "running":
		return true, 0, nil
	case len(f) == 1 && f[0] == "lost":
		return false, ExitLost, nil
	case len(f) == 2 && f[0] == "exited":
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return false, 0, fmt.Errorf("reading status of task %s: bad exit_code %q", key, f[1])
		}
		return false, n, nil
	}
	return false, 0, fmt.Errorf("reading status of task %s: unexpected output %q", key, out)
}

// Output returns the task's combined stdout and stderr from offset on, at most
// MaxOutputChunk bytes; empty when there is nothing new. It stays readable after the
// task ends. driver.ErrNotFound if the machine has no such task.
func (t TaskStore) Output(ctx context.Context, key string, offset int64) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("reading task output: %w", err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("reading output of task %s: negative offset %d", key, offset)
	}
	cmd := fmt.Sprintf("sh -s -- %s %d %d", shellQuote(key), offset+1, MaxOutputChunk)
	out, stderr, code, err := t.run(ctx, cmd, outputScript)
	if err != nil {
		return nil, fmt.Errorf("reading output of task %s: %w", key, err)
	}
	switch {
	case code == exitMissing:
		return nil, fmt.Errorf("reading output of task %s: %w", key, driver.ErrNotFound)
	case code != 0:
		return nil, fmt.Errorf("reading output of task %s: remote read exited %d: %s", key, code, strings.TrimSpace(string(stderr)))
	}
	return out, nil
}

// workDirFile, in a task's directory, holds the absolute path of its working directory.
const workDirFile = "work_dir"

// The statuses of fetchScript besides exitMissing.
const (
	exitRunning  = 45
	exitNoOutput = 46
	exitRefused  = 47
)

// Fetch writes to w, as a tar stream, the path rel of an ended task's working directory
// (see driver.TaskRunner.FetchOutput): the machine checks with find that no socket,
// device or fifo is there (tar would skip a socket silently) and then runs tar. Its
// errors: driver.ErrNotFound when the task or rel is unknown, driver.ErrPermanent while
// the task runs or for a refused file, named.
func (t TaskStore) Fetch(ctx context.Context, key, rel string, w io.Writer) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("fetching task output: %w", err)
	}
	if err := driver.CheckTaskPath(rel); err != nil {
		return driver.Permanent(fmt.Errorf("fetching output of task %s: %w", key, err))
	}
	cmd := "sh -s -- " + shellQuote(key) + " " + shellQuote(rel)
	stderr, code, err := t.Shell.RunShell(ctx, cmd, strings.NewReader(t.dirLine()+fetchScript), w)
	if err != nil {
		return fmt.Errorf("fetching output %s of task %s: %w", rel, key, err)
	}
	msg := strings.TrimSpace(string(stderr))
	switch code {
	case 0:
		return nil
	case exitMissing:
		return fmt.Errorf("fetching output %s of task %s: %w", rel, key, driver.ErrNotFound)
	case exitNoOutput:
		return driver.NotFound(fmt.Errorf("fetching output %s of task %s: %s", rel, key, msg))
	case exitRunning, exitRefused:
		return driver.Permanent(fmt.Errorf("fetching output %s of task %s: %s", rel, key, msg))
	}
	return fmt.Errorf("fetching output %s of task %s: remote tar exited %d: %s", rel, key, code, msg)
}

// FetchStream is Fetch as a reader (driver.TaskRunner.FetchOutput's stream).
func (t TaskStore) FetchStream(ctx context.Context, key, rel string) io.ReadCloser {
	return driver.StreamOutput(ctx, func(ctx context.Context, w io.Writer) error { return t.Fetch(ctx, key, rel, w) })
}

// Kill sends SIGTERM to the task's process group, SIGKILL after 10 s if anything in it
// is left, and returns once the group is gone and its exit status is recorded (or 5 s
// after that). Killing a task that already ended returns nil; driver.ErrNotFound if the
// machine has no such task.
func (t TaskStore) Kill(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("killing task: %w", err)
	}
	err := t.kill(ctx, []string{key})
	if err != nil {
		return fmt.Errorf("killing task %s: %w", key, err)
	}
	return nil
}

// KillAll kills the tasks as Kill does, all at once: every group gets SIGTERM together and
// those left after 10 s get SIGKILL, so killing many tasks takes as long as killing one.
// Keys the machine does not have are skipped.
func (t TaskStore) KillAll(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return fmt.Errorf("killing tasks: %w", err)
		}
	}
	if err := t.kill(ctx, keys); err != nil && !driver.IsNotFound(err) {
		return fmt.Errorf("killing tasks: %w", err)
	}
	return nil
}

func (t TaskStore) kill(ctx context.Context, keys []string) error {
	cmd := fmt.Sprintf("sh -s -- %d", killGraceSeconds*10)
	for _, k := range keys {
		cmd += " " + shellQuote(k)
	}
	_, stderr, code, err := t.run(ctx, cmd, killScript)
	switch {
	case err != nil:
		return err
	case code == exitMissing:
		return driver.ErrNotFound
	case code != 0:
		return fmt.Errorf("remote kill exited %d: %s", code, strings.TrimSpace(string(stderr)))
	}
	return nil
}

// FailUnlaunched ends a task whose wrapper never ran (RemoteTask.LaunchedElsewhere: the
// container meant to run it could not start): message goes to its output and its exit
// status is 127, as for a command that cannot be run; it is marked cancelled, so a wrapper
// launched after all (an image pulled at a later try) does not run it. A task whose
// wrapper ran, or that ended, is left as it is.
func (t TaskStore) FailUnlaunched(ctx context.Context, key, message string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("failing task: %w", err)
	}
	_, stderr, code, err := t.run(ctx, "sh -s -- "+shellQuote(key)+" "+shellQuote(message), failUnlaunchedScript)
	switch {
	case err != nil:
		return fmt.Errorf("failing task %s: %w", key, err)
	case code == exitMissing:
		return fmt.Errorf("failing task %s: %w", key, driver.ErrNotFound)
	case code != 0:
		return fmt.Errorf("failing task %s: exited %d: %s", key, code, strings.TrimSpace(string(stderr)))
	}
	return nil
}

// failUnlaunchedScript: $1 the key, $2 the message.
const failUnlaunchedScript = `d="$tasks_dir/$1"
[ -d "$d" ] || exit 44
[ -f "$d/wrapper.pid" ] || [ -f "$d/exit_code" ] && exit 0
: > "$d/cancelled"
printf 'mlcompute: %s\n' "$2" >> "$d/output.log"
echo 127 > "$d/exit_code.tmp" && mv -f "$d/exit_code.tmp" "$d/exit_code"
`

// shellQuote quotes s for POSIX sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// heredocDelimiter returns a delimiter that is no line of body.
func heredocDelimiter(body string) (string, error) {
	for range 8 {
		b := make([]byte, 8)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		d := "MLCOMPUTE_EOF_" + hex.EncodeToString(b)
		if !strings.Contains(body, d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no heredoc delimiter found")
}

// startScript runs on the machine with the key as $1. The task's directory is created
// atomically (mkdir), so of two concurrent Starts only one launches the wrapper; both
// wait for the pid.
const startScript = `set -eu
umask 077
command -v setsid >/dev/null 2>&1 || { echo "setsid is not installed on the machine" >&2; exit 1; }
base="$tasks_dir"
d="$base/$1"
mkdir -p "$base"
if mkdir "$d" 2>/dev/null; then
  mkdir "$d/work"
  cat > "$d/run.sh" <<'@DELIM@'
@RUN@@DELIM@
  cat > "$d/wrapper.sh" <<'@DELIM@'
@WRAPPER@@DELIM@
  @LAUNCH@
fi
@AWAIT@
`

// launchWrapper and awaitPid are the start script's launch of the wrapper, detached, and
// its wait for the task's pid; a task launched elsewhere has neither.
const (
	launchWrapper = `setsid sh "$d/wrapper.sh" "$d" </dev/null >/dev/null 2>&1 &`
	awaitPid      = `i=0
while [ ! -f "$d/pid" ] && [ ! -f "$d/exit_code" ]; do
  i=$((i+1))
  if [ "$i" -gt 100 ]; then echo "the task wrapper did not record a pid within 10 s; see $d" >&2; exit 1; fi
  sleep 0.1 2>/dev/null || sleep 1
done`
)

// fetchScript runs on the machine with the key as $1 and the output's path as $2.
const fetchScript = `d="$tasks_dir/$1"
[ -d "$d" ] || exit 44
[ -f "$d/exit_code" ] || { echo "the task is still running" >&2; exit 45; }
[ -f "$d/work_dir" ] || { echo "the task recorded no working directory: it never started, or an older engine started it" >&2; exit 46; }
w=$(cat "$d/work_dir")
p="$w/$2"
if [ ! -e "$p" ] && [ ! -L "$p" ]; then echo "$2 does not exist in the task's working directory" >&2; exit 46; fi
refuse() { echo "output file $1 is a socket, device or fifo; an output holds regular files, directories and symlinks" >&2; exit 47; }
if [ -d "$p" ] && [ ! -L "$p" ]; then
  bad=$(find "$p" \( -type s -o -type b -o -type c -o -type p \) -print | head -n 1)
  [ -z "$bad" ] || refuse "${bad#"$w"/}"
  exec tar -C "$p" -cf - .
fi
if [ -S "$p" ] || [ -b "$p" ] || [ -c "$p" ] || [ -p "$p" ]; then refuse "$2"; fi
exec tar -C "${p%/*}" -cf - "${p##*/}"
`

// wrapperScript runs in its own session with the task directory as $1. The task gets a
// session (and so a process group) of its own, whose id is the pid recorded: Kill signals
// the group without touching the wrapper, which then records the exit status. A task
// killed before it started (Kill left "cancelled") never starts, and ends as if killed by
// SIGTERM.
const wrapperScript = `d=$1
cat /proc/sys/kernel/random/boot_id > "$d/boot_id" 2>/dev/null || rm -f "$d/boot_id"
echo $$ > "$d/wrapper.pid.tmp" && mv -f "$d/wrapper.pid.tmp" "$d/wrapper.pid"
if [ -f "$d/cancelled" ]; then
  rm -f "$d/run.sh"
  [ -f "$d/exit_code" ] || { echo 143 > "$d/exit_code.tmp" && mv -f "$d/exit_code.tmp" "$d/exit_code"; }
  exit 0
fi
setsid sh "$d/run.sh" > "$d/output.log" 2>&1 < /dev/null &
pid=$!
echo "$pid" > "$d/pid.tmp" && mv -f "$d/pid.tmp" "$d/pid"
wait "$pid"
code=$?
echo "$code" > "$d/exit_code.tmp" && mv -f "$d/exit_code.tmp" "$d/exit_code"
`

// taskFuncs is the shell functions the scripts below share. A pid is only the task's while
// the machine has not rebooted since the wrapper recorded it (the wrapper records the boot
// id beside it): after a reboot the number can belong to any process, which must neither
// look like the task nor be signalled.
const taskFuncs = `rebooted() {
  [ -f "$1/boot_id" ] && [ -r /proc/sys/kernel/random/boot_id ] &&
    [ "$(cat /proc/sys/kernel/random/boot_id)" != "$(cat "$1/boot_id")" ]
}
wrapper_gone() {
  [ -f "$1/wrapper.pid" ] && { rebooted "$1" || ! kill -0 "$(cat "$1/wrapper.pid")" 2>/dev/null; }
}
`

const statusScript = taskFuncs + `d="$tasks_dir/$1"
[ -d "$d" ] || exit 44
if [ -f "$d/exit_code" ]; then echo "exited $(cat "$d/exit_code")"; exit 0; fi
if wrapper_gone "$d"; then
  if [ -f "$d/exit_code" ]; then echo "exited $(cat "$d/exit_code")"; else echo lost; fi
  exit 0
fi
echo running
`

// waitScript runs before statusScript: it loops until the task recorded its exit status
// or its wrapper is gone. Closing a session without a terminal does not end the loop, so
// it writes a newline about once a second (which the status parsing skips): once the
// session is gone the write fails, and the loop ends rather than polling on the machine
// for as long as the task runs.
const waitScript = taskFuncs + `d="$tasks_dir/$1"
[ -d "$d" ] || exit 44
i=0
while [ ! -f "$d/exit_code" ]; do
  if wrapper_gone "$d"; then break; fi
  i=$((i+1))
  if [ "$i" -ge 5 ]; then i=0; echo || exit 1; fi
  sleep 0.2 2>/dev/null || sleep 1
done
`

// listScript: $1 a key prefix; prints the keys of tasks without an exit status.
const listScript = taskFuncs + `for d in "$tasks_dir/$1"*; do
  [ -d "$d" ] || continue
  [ -f "$d/exit_code" ] && continue
  if wrapper_gone "$d"; then continue; fi
  echo "${d##*/}"
done
exit 0
`

// outputScript: $1 key, $2 first byte (1-based), $3 most bytes.
const outputScript = `d="$tasks_dir/$1"
[ -d "$d" ] || exit 44
[ -f "$d/output.log" ] || exit 0
tail -c +"$2" "$d/output.log" | head -c "$3"
`

// killScript: $1 tenths of a second to wait after SIGTERM, then the task keys. Every
// task's group gets SIGTERM at once and those left after the wait get SIGKILL; then it
// waits (5 s at most) for the signalled tasks' exit statuses. A task still starting (no
// pid recorded yet) is marked cancelled, so a wrapper that has not started it never will,
// and its pid is awaited as Start does (10 s at most). If a group does not exist yet (the
// task's setsid has not run), the pid alone is signalled. A task from before a reboot is
// never signalled (its pid may be another process's now). A single key whose task does
// not exist exits 44; with several, missing ones are skipped.
const killScript = taskFuncs + `grace=$1; shift
base="$tasks_dir"
if [ $# -eq 1 ] && [ ! -d "$base/$1" ]; then exit 44; fi
pids=; signalled=
for k in "$@"; do
  d="$base/$k"
  [ -d "$d" ] && [ ! -f "$d/exit_code" ] && ! rebooted "$d" || continue
  if [ ! -f "$d/pid" ]; then
    : > "$d/cancelled"
    j=0
    while [ ! -f "$d/pid" ] && [ ! -f "$d/exit_code" ] && [ "$j" -lt 100 ]; do
      j=$((j+1))
      sleep 0.1 2>/dev/null || sleep 1
    done
    [ -f "$d/pid" ] && [ ! -f "$d/exit_code" ] || continue
  fi
  pid=$(cat "$d/pid")
  if kill -TERM -"$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null; then
    pids="$pids $pid"; signalled="$signalled $k"
  fi
done
i=0
for pid in $pids; do
  while kill -0 -"$pid" 2>/dev/null; do
    i=$((i+1))
    if [ "$i" -gt "$grace" ]; then kill -KILL -"$pid" 2>/dev/null; break; fi
    sleep 0.1 2>/dev/null || sleep 1
  done
done
i=0
for k in $signalled; do
  while [ ! -f "$base/$k/exit_code" ] && [ "$i" -lt 50 ]; do
    i=$((i+1))
    sleep 0.1 2>/dev/null || sleep 1
  done
done
exit 0
`
