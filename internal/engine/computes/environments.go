package computes

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Environments (DESIGN 8) are prepared on a job's nodes before its tasks start: a
// system-managed one is built (or found) in the node's cache by a task, a user-managed one's
// interpreter is checked by a task. Both go through the driver's TaskRunner, so they work
// wherever jobs run; their output is part of the job's log, and their ends arrive as
// TaskExited events for keys starting with model.EnvTaskPrefix.

// ReasonBuilding is a Preparing job's reason while its environment is built on its nodes.
const ReasonBuilding = "building environment"

// ReasonChecking is a Preparing job's reason while its interpreter is looked for.
const ReasonChecking = "checking the environment's interpreter"

// buildScript builds a virtual environment into the node's cache, once per content hash
// and machine. It runs under the environment's own interpreter (sys.executable makes the
// venv). Argument 1 is the cache name, the rest are pip's arguments.
//
//   - The cache is $MLCOMPUTE_ENV_CACHE (local nodes share the engine's) or
//     ~/.mlcompute/envs (an attached machine's own).
//   - A published environment is <cache>/<name>, a symlink to builds/<name>-<pid>; it is
//     made beside and renamed over the name, so it appears whole or not at all, and the
//     build never moves (venv scripts name their directory in their "#!" line).
//   - Builders of one name take an exclusive flock on <cache>/<name>.lock: the second job
//     waits and then finds the first job's build. The lock dies with its process, and the
//     next builder removes unpublished leftovers (a build that was killed).
const buildScript = `import fcntl, os, shutil, subprocess, sys, time
name, pip = sys.argv[1], sys.argv[2:]
cache = os.environ.get("MLCOMPUTE_ENV_CACHE") or os.path.join(os.path.expanduser("~"), ".mlcompute", "envs")
builds = os.path.join(cache, "builds")
os.makedirs(builds, exist_ok=True)
final = os.path.join(cache, name)
def say(msg):
    print("mlcompute: " + msg, flush=True)
def ready():
    return os.path.exists(os.path.join(final, "bin", "python"))
if ready():
    say("environment %s is ready on this machine; no build needed" % name)
    sys.exit(0)
with open(os.path.join(cache, name + ".lock"), "w") as lock:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        say("waiting for another job that is building environment %s" % name)
        fcntl.flock(lock, fcntl.LOCK_EX)
    if ready():
        say("environment %s was built by another job; no build needed" % name)
        sys.exit(0)
    published = os.path.realpath(final) if os.path.lexists(final) else ""
    for d in os.listdir(builds):
        p = os.path.join(builds, d)
        if d.startswith(name + "-") and p != published:
            shutil.rmtree(p, ignore_errors=True)
    build = os.path.join(builds, "%s-%d" % (name, os.getpid()))
    start = time.monotonic()
    say("building environment %s with %s" % (name, sys.executable))
    r = subprocess.run([sys.executable, "-m", "venv", build])
    if r.returncode != 0:
        say("creating the virtual environment failed (exit status %d)" % r.returncode)
        sys.exit(r.returncode)
    if pip:
        say("pip " + " ".join(pip))
        r = subprocess.run([os.path.join(build, "bin", "python"), "-m", "pip"] + pip)
        if r.returncode != 0:
            say("pip failed (exit status %d)" % r.returncode)
            sys.exit(r.returncode)
    link = "%s.new-%d" % (final, os.getpid())
    os.symlink(os.path.join("builds", os.path.basename(build)), link)
    os.rename(link, final)
    say("environment %s built in %.1fs" % (name, time.monotonic() - start))
`

// checkScript checks that a user-managed environment's interpreter is on the node.
const checkScript = `if [ -f "$1" ] && [ -x "$1" ]; then echo "mlcompute: using interpreter $1"; exit 0; fi
echo "mlcompute: interpreter $1 is not an executable file on this node" >&2
exit 127`

// wrapScript runs a job's command with its environment's bin directory first on PATH.
const wrapScript = `if [ -n "${MLCOMPUTE_ENV_NAME:-}" ]; then
VIRTUAL_ENV="${MLCOMPUTE_ENV_CACHE:-$HOME/.mlcompute/envs}/$MLCOMPUTE_ENV_NAME"; export VIRTUAL_ENV
MLCOMPUTE_ENV_BIN="$VIRTUAL_ENV/bin"
fi
PATH="$MLCOMPUTE_ENV_BIN:$PATH"; export PATH
exec "$@"`

// envCache is the environment cache of a job's nodes: the engine's, shared by every local
// node of this machine, or "" (the machine's own, in its home) for attached machines and
// other drivers.
func (c *Core) envCache(j model.Job) string {
	if c.EnvCacheDir == "" {
		return ""
	}
	var rec model.Compute
	_ = c.Store.View(func(tx *store.Tx) error {
		_, err := tx.Get(store.Computes, j.ComputeKey, &rec)
		return err
	})
	if rec.Attached != nil {
		return ""
	}
	return c.EnvCacheDir
}

// envTask is the preparation task of a job's environment on one node.
func (c *Core) envTask(j model.Job, rank int) driver.TaskSpec {
	def := j.EnvDef.Definition
	spec := driver.TaskSpec{Key: j.EnvTaskKey(rank), Env: map[string]string{}}
	switch environment.StepFor(&def) {
	case environment.Build:
		spec.Command = append([]string{def.Python.Python, "-c", buildScript, environment.CacheName(j.EnvDef.Hash)}, environment.PipArgs(*def.Python)...)
		if cache := c.envCache(j); cache != "" {
			spec.Env["MLCOMPUTE_ENV_CACHE"] = cache
		}
	case environment.Check:
		spec.Command = []string{"/bin/sh", "-c", checkScript, "mlcompute-check", def.UserManaged.InterpreterPath}
	}
	return spec
}

// wrapTask puts the job's environment first on the task's PATH.
func (c *Core) wrapTask(j model.Job, spec *driver.TaskSpec) {
	if j.EnvDef == nil {
		return
	}
	def := j.EnvDef.Definition
	switch environment.StepFor(&def) {
	case environment.Build:
		spec.Env["MLCOMPUTE_ENV_NAME"] = environment.CacheName(j.EnvDef.Hash)
		if cache := c.envCache(j); cache != "" {
			spec.Env["MLCOMPUTE_ENV_CACHE"] = cache
		}
	case environment.Check:
		spec.Env["MLCOMPUTE_ENV_BIN"] = environment.InterpreterDir(*def.UserManaged)
	default:
		return
	}
	spec.Command = append([]string{"/bin/sh", "-c", wrapScript, "mlcompute-env"}, spec.Command...)
}

// prepareEnvironment starts the preparation of a job's environment on the nodes where it
// has not ended yet, and reports whether the job must wait for it (the tasks' exits come
// back through EnvTaskExited in the jobs' controller, which starts the job again). A
// preparation task that ended while the engine was down is applied at once.
func (c *Core) prepareEnvironment(ctx context.Context, j model.Job) (wait bool) {
	if j.EnvDef == nil || environment.StepFor(&j.EnvDef.Definition) == environment.None || j.EnvReady() {
		return false
	}
	reason := ReasonBuilding
	if environment.StepFor(&j.EnvDef.Definition) == environment.Check {
		reason = ReasonChecking
	}
	c.Mu.Lock()
	_ = c.Store.Update(func(tx *store.Tx) error {
		cur, ok := model.GetJob(tx, j.Workspace, j.ID)
		if !ok || cur.Status != api.JobPreparing || cur.Attempt != j.Attempt || cur.Preparing == reason {
			return nil
		}
		cur.Preparing = reason
		return model.PutJob(tx, cur)
	})
	c.Mu.Unlock()
	var err error
	for rank, node := range j.Nodes {
		if _, done := j.EnvExits[rank]; done && j.EnvAttempt == j.Attempt {
			continue
		}
		spec := c.envTask(j, rank)
		st, serr := c.Driver.TaskStatus(ctx, node, spec.Key)
		switch {
		case serr == nil && !st.Running:
			c.Loop.Go(func() { c.OnTaskExit(ctx, node, spec.Key, st.ExitCode) })
			continue
		case serr == nil:
			continue
		}
		if err = c.Driver.StartTask(ctx, node, spec); err != nil {
			err = fmt.Errorf("starting the environment's preparation on node %s: %w", node, err)
			break
		}
	}
	if err != nil && ctx.Err() == nil {
		c.failPreparing(j, err.Error())
		c.KillJob(ctx, j)
		c.FreeNodes(j)
		return true
	}
	if err == nil {
		c.Log.Info("preparing job environment", "job", j.ID, "environment", j.EnvDef.Name, "content_hash", j.EnvDef.Hash, "nodes", strings.Join(j.Nodes, ","))
	}
	return true
}

// failPreparing fails a job that is still Preparing.
func (c *Core) failPreparing(j model.Job, why string) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	_ = c.Store.Update(func(tx *store.Tx) error {
		cur, ok := model.GetJob(tx, j.Workspace, j.ID)
		if !ok || cur.Status != api.JobPreparing {
			return nil
		}
		cur.Preparing = ""
		cur.Finish(api.JobFailed, nil, why, c.Clock.Now().UTC())
		return model.PutJob(tx, cur)
	})
}

// EnvLogPath is where a rank's environment preparation output is kept once it ended; it
// opens the rank's job log.
func (c *Core) EnvLogPath(jobID string, rank int) string {
	return filepath.Join(c.DataDir, "jobs", jobID, fmt.Sprintf("env-rank-%d.log", rank))
}

// LastLines returns the last n non-empty lines of out, for error messages.
func LastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	var keep []string
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		if l := strings.TrimRight(lines[i], "\r "); l != "" {
			keep = append([]string{l}, keep...)
		}
	}
	return strings.Join(keep, "\n")
}
