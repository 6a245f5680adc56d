//go:build unix

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh/sshtest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
)

// envWorkspace is the workspace of the environment tests.
const envWorkspace = "e2e-envs"

// needVenv fails, naming the package, when python3 cannot make virtual environments here.
func needVenv(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("python3", "-m", "venv", filepath.Join(t.TempDir(), "v")).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv does not work here (make test installs python3-venv: scripts/test-deps.sh): %v\n%s", err, out)
	}
}

// wheelDir makes a directory holding mlctest 0.1 (a wheel made here, offline) that every
// user of the machine can read: attached machines' users build from it too.
func wheelDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mlc-e2e-wheels-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	whl, err := enginetest.MakeWheel(dir, "mlctest", "0.1", "HELLO = 'hello from mlctest'\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(whl, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// envJob submits a job in an environment (without waiting) and returns its ID.
func (u *user) envJob(compute, env string, command ...string) string {
	u.t.Helper()
	out, code := u.cli(append([]string{"job", "submit", "--workspace", envWorkspace, "--compute", compute, "--environment", env, "--"}, command...)...)
	if code != 0 {
		u.t.Fatalf("job submit --environment %s: exit %d: %s", env, code, out)
	}
	return strings.TrimSpace(out)
}

// finished waits for a job to end and returns it with its log.
func (u *user) finished(id string, limit time.Duration) (api.Job, string) {
	u.t.Helper()
	var j api.Job
	u.waitFor("job "+id+" finished", limit, func() bool {
		out, code := u.cli("job", "show", "--workspace", envWorkspace, id, "-o", "json")
		if code != 0 {
			u.t.Fatalf("job show: %s", out)
		}
		decodeJSON(u.t, out, &j)
		return api.Terminal(j.Status)
	})
	log, _ := u.cli("job", "logs", "--workspace", envWorkspace, id)
	return j, log
}

func startDelay(j api.Job) time.Duration {
	if j.StartedAt == nil {
		return -1
	}
	return j.StartedAt.Sub(j.SubmittedAt).Round(time.Millisecond)
}

// trainConfig is the environments' tests' configuration: a workspace, a cluster of up to
// two nodes released as soon as they are idle, and the environment "train" built offline
// from the wheels in the find_links directory.
func trainConfig(wheels string) string {
	return requiredProviders + fmt.Sprintf(`
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = %q
}

resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    max_node_count                       = 2
    scale_down_nodes_after_idle_duration = "PT0S"
  }
}

resource "mlcompute_environment" "train" {
  name         = "train"
  workspace_id = mlcompute_workspace.ws.id
  python       = { requirements = ["mlctest==0.1"], find_links = [%[2]q] }
}
`, envWorkspace, wheels)
}

const importMLCTest = `import mlctest, sys; print(mlctest.HELLO, "in", sys.prefix)`

// TestE2E_Environments: a user declares environments with terraform (offline: a local wheel
// directory and no index) and runs jobs in them with the CLI. The first job builds the
// environment on its node; a second job on a new node of the same machine starts without a
// build; two jobs at once with a new environment build it once; a bad requirement fails
// its job with pip's message; a user-managed interpreter comes first on PATH.
func TestE2E_Environments(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	needVenv(t)
	wheels := wheelDir(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	if real, err := filepath.EvalSymlinks(py); err == nil {
		py = real
	}
	u.writeConfig(trainConfig(wheels) + fmt.Sprintf(`
resource "mlcompute_environment" "twice" {
  name         = "twice"
  workspace_id = mlcompute_workspace.ws.id
  python       = { requirements = ["mlctest"], find_links = [%[1]q] }
}

resource "mlcompute_environment" "bad" {
  name         = "bad"
  workspace_id = mlcompute_workspace.ws.id
  python       = { requirements = ["nope==9"], find_links = [%[1]q] }
}

resource "mlcompute_environment" "mine" {
  name         = "mine"
  workspace_id = mlcompute_workspace.ws.id
  user_managed = { interpreter_path = %[2]q }
}
`, wheels, py))
	u.mustTerraform("apply", "-auto-approve")
	if out, code := u.terraform("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan after apply: exit %d:\n%s", code, out)
	}
	cache := filepath.Join(u.home, "envs")

	first, log1 := u.finished(u.envJob("cpu", "train", "python", "-c", importMLCTest), 3*time.Minute)
	if first.Status != api.JobCompleted || !strings.Contains(log1, "mlcompute: building environment") || !strings.Contains(log1, "hello from mlctest in "+cache+"/") {
		t.Fatalf("first job %s (%s):\n%s", first.Status, first.Error, log1)
	}
	// Its node goes at once (idle PT0S): the second job gets a new node.
	u.waitFor("the cluster back to 0 nodes", time.Minute, func() bool { return u.computeIn(envWorkspace, "cpu").CurrentNodeCount == 0 })
	second, log2 := u.finished(u.envJob("cpu", "train", "python", "-c", importMLCTest), time.Minute)
	if second.Status != api.JobCompleted || strings.Contains(log2, "building environment") || !strings.Contains(log2, "no build needed") || !strings.Contains(log2, "hello from mlctest") {
		t.Fatalf("second job %s (%s):\n%s", second.Status, second.Error, log2)
	}
	if first.Nodes[0] == second.Nodes[0] {
		t.Fatalf("both jobs ran on node %s; the second must run on a new node", first.Nodes[0])
	}
	t.Logf("start delay: first job (built the environment) %s, second job on a new node (reused it) %s", startDelay(first), startDelay(second))

	a, b := u.envJob("cpu", "twice", "python", "-c", importMLCTest), u.envJob("cpu", "twice", "python", "-c", importMLCTest)
	ja, loga := u.finished(a, 3*time.Minute)
	jb, logb := u.finished(b, 3*time.Minute)
	if ja.Status != api.JobCompleted || jb.Status != api.JobCompleted || strings.Count(loga+logb, "mlcompute: building environment") != 1 {
		t.Fatalf("two jobs at once: %s, %s; want both completed after one build:\n%s\n%s", ja.Status, jb.Status, loga, logb)
	}

	bad, _ := u.finished(u.envJob("cpu", "bad", "python", "-c", importMLCTest), 3*time.Minute)
	if bad.Status != api.JobFailed || !strings.Contains(bad.Error, `building environment "bad" failed`) || !strings.Contains(bad.Error, "nope==9") {
		t.Fatalf("bad requirement: %s: %q", bad.Status, bad.Error)
	}

	mine, logMine := u.finished(u.envJob("cpu", "mine", "sh", "-c", "command -v "+filepath.Base(py)), time.Minute)
	if mine.Status != api.JobCompleted || !strings.Contains(logMine, py+"\n") {
		t.Fatalf("user-managed: %s (%s):\n%s", mine.Status, mine.Error, logMine)
	}
	u.mustTerraform("destroy", "-auto-approve")
}

// computeIn reads a compute of any workspace through the CLI.
func (u *user) computeIn(ws, name string) api.Compute {
	u.t.Helper()
	out, code := u.cli("compute", "show", "--workspace", ws, name, "-o", "json")
	if code != 0 {
		u.t.Fatalf("compute show: exit %d: %s", code, out)
	}
	var c api.Compute
	decodeJSON(u.t, out, &c)
	return c
}

// gatedWheels serves mlctest as a find_links page over loopback HTTP; the wheel's download
// waits until release is closed, so a build can be caught half-way.
type gatedWheels struct {
	url       string
	requested chan struct{}
	release   chan struct{}
	once      sync.Once
}

func serveGatedWheels(t *testing.T, dir string) *gatedWheels {
	t.Helper()
	g := &gatedWheels{requested: make(chan struct{}), release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	files := http.FileServer(http.Dir(dir))
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			fmt.Fprint(w, `<html><body><a href="mlctest-0.1-py3-none-any.whl">mlctest-0.1-py3-none-any.whl</a></body></html>`)
			return
		}
		g.once.Do(func() { close(g.requested) })
		select {
		case <-g.release:
		case <-r.Context().Done():
			return
		}
		files.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	g.url = "http://" + ln.Addr().String() + "/"
	return g
}

// killBuild SIGKILLs the processes building a cache name (the build script and pip, both
// name it on their command line): the build dies half-way, as in a machine crash.
func killBuild(t *testing.T, name string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	killed := 0
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(raw), name) || !strings.Contains(string(raw), "python") {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid); err == nil && pid != os.Getpid() {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
	}
	return killed
}

// TestE2E_EnvironmentBuildKilledWithTheEngine: the engine is SIGKILLed while a job's
// environment is half-built (pip waits for a wheel over loopback HTTP), and the build dies
// with it, as in a machine crash. After the engine starts again, the half-built environment
// was never published and is never used: a later job builds it properly and imports the
// package.
func TestE2E_EnvironmentBuildKilledWithTheEngine(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	needVenv(t)
	wheels := wheelDir(t)
	gate := serveGatedWheels(t, wheels)
	u.writeConfig(requiredProviders + fmt.Sprintf(`
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = %q
}

resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = { max_node_count = 2 }
}

resource "mlcompute_environment" "slow" {
  name         = "slow"
  workspace_id = mlcompute_workspace.ws.id
  python       = { requirements = ["mlctest==0.1"], find_links = [%q] }
}
`, envWorkspace, gate.url))
	u.mustTerraform("apply", "-auto-approve")
	id := u.envJob("cpu", "slow", "true")
	select {
	case <-gate.requested:
	case <-time.After(3 * time.Minute):
		t.Fatal("pip never asked for the wheel")
	}
	show, _ := u.cli("job", "show", "--workspace", envWorkspace, id, "-o", "json")
	var j api.Job
	decodeJSON(t, show, &j)
	if j.Status != api.JobPreparing || j.Reason != "building environment" {
		t.Fatalf("job during the build: %s, reason %q; want Preparing, building environment", j.Status, j.Reason)
	}
	name := environment.CacheName(j.EnvironmentHash)
	cache := filepath.Join(u.home, "envs")
	if dirs, _ := filepath.Glob(filepath.Join(cache, "builds", name+"-*")); len(dirs) != 1 {
		t.Fatalf("half-built environment directories: %v; want one", dirs)
	}

	pid := u.enginePID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	u.waitGone(pid, 10*time.Second)
	if n := killBuild(t, name); n == 0 {
		t.Fatal("found no build process to kill")
	}
	if _, err := os.Lstat(filepath.Join(cache, name)); !os.IsNotExist(err) {
		t.Fatalf("the half-built environment was published: %v", err)
	}
	close(gate.release)

	// The CLI starts the engine again; the killed build's job fails with the build's story.
	killedJob, _ := u.finished(id, time.Minute)
	if killedJob.Status != api.JobFailed {
		t.Fatalf("the job whose build was killed: %s (%s); want Failed", killedJob.Status, killedJob.Error)
	}
	later, log := u.finished(u.envJob("cpu", "slow", "python", "-c", importMLCTest), 3*time.Minute)
	if later.Status != api.JobCompleted || !strings.Contains(log, "mlcompute: building environment "+name) || !strings.Contains(log, "hello from mlctest in "+filepath.Join(cache, name)) {
		t.Fatalf("the later job %s (%s):\n%s", later.Status, later.Error, log)
	}
	if dirs, _ := filepath.Glob(filepath.Join(cache, "builds", name+"-*")); len(dirs) != 1 {
		t.Fatalf("build directories after the rebuild: %v; want only the published one", dirs)
	}
	u.mustTerraform("destroy", "-auto-approve")
}

// TestE2E_AttachedMachineBuildsItsOwnEnvironment: a job in a system-managed environment on
// an attached machine (a real sshd test host) builds the environment there, in the remote
// user's ~/.mlcompute/envs, not in the engine's cache.
func TestE2E_AttachedMachineBuildsItsOwnEnvironment(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	needVenv(t)
	wheels := wheelDir(t)
	h := sshtest.Start(t)
	key := h.KeyFile(t)
	u.writeConfig(requiredProviders + fmt.Sprintf(`
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = %q
}

resource "mlcompute_attached_compute" "box" {
  name         = "box"
  workspace_id = mlcompute_workspace.ws.id
  virtual_machine = {
    address     = %q
    ssh_port    = %d
    username    = %q
    private_key = file(%q)
  }
}

resource "mlcompute_environment" "train" {
  name         = "train"
  workspace_id = mlcompute_workspace.ws.id
  python       = { requirements = ["mlctest==0.1"], find_links = [%q] }
}
`, envWorkspace, h.Address, h.Port, h.User, key, wheels))
	u.mustTerraform("apply", "-auto-approve")
	j, log := u.finished(u.envJob("box", "train", "python", "-c", importMLCTest), 3*time.Minute)
	remote := filepath.Join(h.Home, ".mlcompute", "envs")
	if j.Status != api.JobCompleted || !strings.Contains(log, "mlcompute: building environment") || !strings.Contains(log, "hello from mlctest in "+remote+"/") {
		t.Fatalf("job on the attached machine %s (%s):\n%s", j.Status, j.Error, log)
	}
	name := environment.CacheName(j.EnvironmentHash)
	if _, err := os.Stat(filepath.Join(remote, name, "bin", "python")); err != nil {
		t.Fatalf("no build in the remote user's cache: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(u.home, "envs", name)); !os.IsNotExist(err) {
		t.Fatalf("the attached machine's job built into the engine's cache: %v", err)
	}
	u.mustTerraform("destroy", "-auto-approve")
}
