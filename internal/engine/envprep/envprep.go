// Package envprep is what a node runs to prepare an environment (DESIGN 8): the scripts
// that build a system-managed environment into the node's cache or check a user-managed
// interpreter, and the commands that run a process with the environment first on PATH.
// Jobs (compute core) and endpoint deployments (endpoints controller) use the same
// scripts, so a build made for one is found by the other. It also removes builds that are
// no longer used from a cache on this machine, under the builders' own lock.
package envprep

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
)

// runMarker separates a build's pip arguments from the command to run once the
// environment is ready (endpoint instances build and serve in one process). No pip
// argument the engine makes looks like it.
const runMarker = "--mlcompute-run"

// BuildScript builds a virtual environment into the node's cache, once per content hash
// and machine. It runs under the environment's own interpreter (sys.executable makes the
// venv). Argument 1 is the cache name, then pip's arguments, then optionally runMarker and
// a command to exec with the environment first on PATH once it is ready.
//
//   - The cache is $MLCOMPUTE_ENV_CACHE (local nodes share the engine's) or
//     ~/.mlcompute/envs (an attached machine's own).
//   - A published environment is <cache>/<name>, a symlink to builds/<name>-<pid>; it is
//     made beside and renamed over the name, so it appears whole or not at all, and the
//     build never moves (venv scripts name their directory in their "#!" line).
//   - Builders of one name take an exclusive flock on <cache>/<name>.lock: the second job
//     waits and then finds the first job's build. The lock dies with its process, and the
//     next builder removes unpublished leftovers (a build that was killed). The engine's
//     clean-up of unused builds takes the same lock (Collect).
const BuildScript = `import fcntl, os, shutil, subprocess, sys, time
name, pip, run = sys.argv[1], sys.argv[2:], []
if "` + runMarker + `" in pip:
    i = pip.index("` + runMarker + `")
    pip, run = pip[:i], pip[i + 1:]
cache = os.environ.get("MLCOMPUTE_ENV_CACHE") or os.path.join(os.path.expanduser("~"), ".mlcompute", "envs")
builds = os.path.join(cache, "builds")
final = os.path.join(cache, name)
def say(msg):
    print("mlcompute: " + msg, flush=True)
def ready():
    return os.path.exists(os.path.join(final, "bin", "python"))
def build():
    os.makedirs(builds, exist_ok=True)
    if ready():
        say("environment %s is ready on this machine; no build needed" % name)
        return 0
    with open(os.path.join(cache, name + ".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            say("waiting for another job that is building environment %s" % name)
            fcntl.flock(lock, fcntl.LOCK_EX)
        if ready():
            say("environment %s was built by another job; no build needed" % name)
            return 0
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
            return r.returncode
        if pip:
            say("pip " + " ".join(pip))
            r = subprocess.run([os.path.join(build, "bin", "python"), "-m", "pip"] + pip)
            if r.returncode != 0:
                say("pip failed (exit status %d)" % r.returncode)
                return r.returncode
        link = "%s.new-%d" % (final, os.getpid())
        os.symlink(os.path.join("builds", os.path.basename(build)), link)
        os.rename(link, final)
        say("environment %s built in %.1fs" % (name, time.monotonic() - start))
        return 0
rc = build()
if rc != 0 or not run:
    sys.exit(rc)
os.environ["VIRTUAL_ENV"] = final
os.environ["PATH"] = os.path.join(final, "bin") + os.pathsep + os.environ.get("PATH", "")
sys.stdout.flush()
os.execvp(run[0], run)
`

// CheckScript checks that a user-managed environment's interpreter is on the node; with
// more arguments, it then execs them with the interpreter's directory first on PATH.
const CheckScript = `i=$1; shift
if [ ! -f "$i" ] || [ ! -x "$i" ]; then
echo "mlcompute: interpreter $i is not an executable file on this node" >&2
exit 127
fi
echo "mlcompute: using interpreter $i"
[ $# -eq 0 ] && exit 0
PATH="$(dirname "$i"):$PATH"; export PATH
exec "$@"`

// WrapScript runs a job's command with its environment's bin directory first on PATH.
const WrapScript = `if [ -n "${MLCOMPUTE_ENV_NAME:-}" ]; then
VIRTUAL_ENV="${MLCOMPUTE_ENV_CACHE:-$HOME/.mlcompute/envs}/$MLCOMPUTE_ENV_NAME"; export VIRTUAL_ENV
MLCOMPUTE_ENV_BIN="$VIRTUAL_ENV/bin"
fi
PATH="$MLCOMPUTE_ENV_BIN:$PATH"; export PATH
exec "$@"`

// Env is an environment as a node needs it: its normalised definition, content hash, and
// the cache its builds go to ("" for the machine's own, ~/.mlcompute/envs).
type Env struct {
	Definition environment.Definition
	Hash       string
	Cache      string
}

// CacheVar names, in a node task's environment, the directory environments are built
// in; unset, it is the machine's own ~/.mlcompute/envs.
const CacheVar = "MLCOMPUTE_ENV_CACHE"

// MachineCache is the environment cache of a task on this machine: CacheVar's, else the
// machine's own ~/.mlcompute/envs.
func MachineCache(getenv func(string) string) (string, error) {
	if c := getenv(CacheVar); c != "" {
		return c, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".mlcompute", "envs"), nil
}

// setCache names the cache in a task's environment when it is not the machine's own.
func (e Env) setCache(vars map[string]string) {
	if e.Cache != "" {
		vars[CacheVar] = e.Cache
	}
}

// Prepare is the command that prepares the environment on a node (build or find it, or
// check the interpreter), with the variables it needs added to vars; nil when there is
// nothing to prepare.
func (e Env) Prepare(vars map[string]string) []string {
	def := e.Definition
	switch step := environment.StepFor(&def); {
	case step.Builds():
		e.setCache(vars)
		py := environment.BuildPython(def)
		return append([]string{py.Python, "-c", BuildScript, environment.CacheName(e.Hash)}, environment.PipArgs(*py)...)
	case step == environment.Check:
		return []string{"/bin/sh", "-c", CheckScript, "mlcompute-check", def.UserManaged.InterpreterPath}
	}
	return nil
}

// Wrap is cmd run with the prepared environment first on PATH, with the variables it needs
// added to vars; cmd itself when there is no environment.
func (e Env) Wrap(cmd []string, vars map[string]string) []string {
	def := e.Definition
	switch step := environment.StepFor(&def); {
	case step.Builds():
		vars["MLCOMPUTE_ENV_NAME"] = environment.CacheName(e.Hash)
		e.setCache(vars)
	case step == environment.Check:
		vars["MLCOMPUTE_ENV_BIN"] = environment.InterpreterDir(*def.UserManaged)
	default:
		return cmd
	}
	return append([]string{"/bin/sh", "-c", WrapScript, "mlcompute-env"}, cmd...)
}

// SnapshotPaths finds an uploaded snapshot's directory (the engine's snapshot store).
type SnapshotPaths interface {
	Path(id string) (string, error)
}

// Container is the image the environment's tasks (and its build on top of the image) run
// in; nil when it is not a container environment. An archive must be in snapshots, where
// the client that named it uploaded it. A build on top of the image gets the node's cache
// mounted, and its find_links directories.
func (e Env) Container(name string, snapshots SnapshotPaths) (*driver.TaskContainer, error) {
	def := e.Definition
	step := environment.StepFor(&def)
	if !step.Containerised() {
		return nil, nil
	}
	ct := def.Container
	tc := &driver.TaskContainer{Image: ct.Image, Hash: e.Hash, EnvCache: step.Builds()}
	if step.Builds() {
		for _, l := range ct.Python.FindLinks {
			if dir := strings.TrimPrefix(l, "file://"); filepath.IsAbs(dir) {
				tc.Mounts = append(tc.Mounts, dir)
			}
		}
	}
	if ct.ImageArchive == "" {
		return tc, nil
	}
	if snapshots == nil {
		return nil, fmt.Errorf("environment %q names an image archive, and this engine keeps no snapshots to ship it from", name)
	}
	dir, err := snapshots.Path(ct.ImageSnapshot)
	if err != nil {
		return nil, fmt.Errorf("environment %q: its image archive (container.image_archive) is not on this engine: %w", name, err)
	}
	tc.Image, tc.Archive = "", filepath.Join(dir, api.ImageArchiveFile)
	return tc, nil
}

// PrepareAndRun is one command that prepares the environment and then execs cmd with it
// first on PATH (an endpoint instance: the build's output opens the process's log, and a
// failed build is a failed start); cmd itself when there is no environment.
func (e Env) PrepareAndRun(cmd []string, vars map[string]string) []string {
	prep := e.Prepare(vars)
	if prep == nil {
		return cmd
	}
	if environment.StepFor(&e.Definition).Builds() {
		prep = append(prep, runMarker)
	}
	return append(prep, cmd...)
}
