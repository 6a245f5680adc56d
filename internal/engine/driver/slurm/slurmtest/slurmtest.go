//go:build unix

// Package slurmtest starts a real Slurm cluster on this machine for tests: Debian's munged,
// one slurmctld and three slurmd (nodes n1, n2, n3, one CPU each) on loopback, all in a
// temporary directory with ports of their own. Start installs Debian's packages (munge
// slurmctld slurmd slurm-client) with apt-get when they are missing, and fails, rather than
// skips, when it cannot (no root and no passwordless sudo). The daemons run as root, so
// the tests must too.
//
// Everything a cluster started is stopped when the test ends, also when it fails: its jobs
// are cancelled, its daemons killed and its directory removed. A test process that is
// killed runs no cleanup, so each cluster keeps a record naming its directory and owner,
// and every Start first removes what the records of dead test processes name (their
// daemons are found by the directory in their command lines). Liveness is read from
// /proc: this machine's PID 1 does not reap orphans, and a zombie counts as dead.
package slurmtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// TB is what Start needs of a test: testing.TB has it all, and a program (a demo) can
// provide it too.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	Setenv(key, value string)
	Failed() bool
}

// Packages are the Debian packages a cluster needs.
var Packages = []string{"munge", "slurmctld", "slurmd", "slurm-client"}

// binaries are what the packages install, checked before anything starts.
var binaries = []string{"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch", "/usr/bin/squeue"}

// GPUsPerNode is how many fake GPUs each node has: GRES gpu, whose devices (gres.conf's
// File=) are character devices the cluster makes in its directory with /dev/null's
// numbers, so Slurm hands them out and sets CUDA_VISIBLE_DEVICES as on a real GPU node.
const GPUsPerNode = 2

// Nodes are the cluster's node names.
var Nodes = []string{"n1", "n2", "n3"}

// Partition is the cluster's only (and default) partition.
const Partition = "debug"

// Cluster is a running Slurm cluster.
type Cluster struct {
	// Dir holds the configuration, state, logs and munge's socket.
	Dir string
	// Conf is slurm.conf; Start sets SLURM_CONF to it for the test (t.Setenv), so the
	// Slurm commands the test and its children run use this cluster.
	Conf string
	// StartedIn is how long the daemons took from the first start to all nodes idle.
	StartedIn time.Duration

	t      TB
	ctld   *exec.Cmd
	slurmd map[string]*exec.Cmd
	munged *exec.Cmd
}

// Start starts a cluster that is stopped when t ends. It sets SLURM_CONF with t.Setenv,
// so a test t (and its parents) must not be parallel.
func Start(t TB) *Cluster {
	t.Helper()
	install(t)
	if os.Geteuid() != 0 {
		t.Fatalf("the Slurm tests must run as root: they start munged as the munge user and slurmd as root")
	}
	sweepLeftovers(t)

	dir, err := os.MkdirTemp("", "mlc-slurm-")
	must(t, err)
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), t: t, slurmd: map[string]*exec.Cmd{}}
	self, err := startTime(os.Getpid())
	must(t, err)
	rec := record{Owner: os.Getpid(), OwnerStart: self, Dir: dir}
	rec.save(t)
	// Registered first, so it runs last: the record goes once all it names is gone.
	t.Cleanup(func() {
		_ = os.RemoveAll(dir)
		_ = os.Remove(rec.path())
	})
	t.Cleanup(c.stop)
	// munged runs as munge and must traverse the directory to its socket.
	must(t, os.Chmod(dir, 0o755))

	begin := time.Now()
	c.startMunge()
	c.writeConf()
	t.Setenv("SLURM_CONF", c.Conf)
	c.StartController(true)
	for _, n := range Nodes {
		c.StartNode(n)
	}
	c.WaitIdle(Nodes...)
	c.StartedIn = time.Since(begin)
	t.Logf("slurm cluster up with %d idle nodes in %s (%s)", len(Nodes), c.StartedIn.Round(time.Millisecond), dir)
	return c
}

// install installs the packages when a binary is missing.
func install(t TB) {
	t.Helper()
	missing := false
	for _, b := range binaries {
		if _, err := os.Stat(b); err != nil {
			missing = true
		}
	}
	if !missing {
		return
	}
	var sudo []string
	if os.Geteuid() != 0 {
		if exec.Command("sudo", "-n", "true").Run() != nil {
			t.Fatalf("Slurm is not installed and this user cannot install it (no root, no passwordless sudo): install the Debian packages %s", strings.Join(Packages, " "))
		}
		sudo = []string{"sudo", "-n"}
	}
	t.Logf("installing %s with apt-get", strings.Join(Packages, " "))
	run := func(args ...string) {
		args = append(sudo, args...)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s\ninstall the Debian packages %s", strings.Join(args, " "), err, out, strings.Join(Packages, " "))
		}
	}
	run("apt-get", "update", "-qq")
	run(append([]string{"apt-get", "install", "-y", "-qq", "--no-install-recommends"}, Packages...)...)
}

// startMunge starts munged as the munge user with a key of its own.
func (c *Cluster) startMunge() {
	t := c.t
	u, err := user.Lookup("munge")
	must(t, err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	md := filepath.Join(c.Dir, "munge")
	must(t, os.Mkdir(md, 0o755))
	key := make([]byte, 1024)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(md, "munge.key")
	must(t, os.WriteFile(keyFile, key, 0o400))
	for _, p := range []string{md, keyFile} {
		must(t, os.Chown(p, uid, gid))
	}
	log, err := os.Create(filepath.Join(md, "munged.out"))
	must(t, err)
	defer log.Close()
	cmd := exec.Command("/usr/sbin/munged", "--foreground", "--socket="+c.MungeSocket(), "--key-file="+keyFile,
		"--pid-file="+filepath.Join(md, "munged.pid"), "--log-file="+filepath.Join(md, "munged.log"),
		"--seed-file="+filepath.Join(md, "munged.seed"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	must(t, cmd.Start())
	go func() { _ = cmd.Wait() }()
	c.munged = cmd
	c.waitFor("munged's socket", func() bool { _, err := os.Stat(c.MungeSocket()); return err == nil })
}

// MungeSocket is where munged listens.
func (c *Cluster) MungeSocket() string { return filepath.Join(c.Dir, "munge", "munge.socket") }

func (c *Cluster) writeConf() {
	ports := freePorts(c.t, 1+len(Nodes))
	var nodes strings.Builder
	for i, n := range Nodes {
		fmt.Fprintf(&nodes, "NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d CPUs=1 RealMemory=500 Gres=gpu:%d State=UNKNOWN\n", n, ports[1+i], GPUsPerNode)
	}
	gpus := filepath.Join(c.Dir, "gpus")
	must(c.t, os.MkdirAll(gpus, 0o755))
	for i := range GPUsPerNode {
		must(c.t, unix.Mknod(filepath.Join(gpus, fmt.Sprintf("gpu%d", i)), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	}
	gres := fmt.Sprintf("NodeName=%s Name=gpu File=%s/gpu[0-%d]\n", strings.Join(Nodes, ","), gpus, GPUsPerNode-1)
	must(c.t, os.WriteFile(filepath.Join(c.Dir, "gres.conf"), []byte(gres), 0o644))
	// sched_interval and bf_interval: a job whose immediate scheduling was deferred (as
	// right after a node came back) starts within seconds, not at the next minute's pass
	// (Slurm's defaults are 60 s and 30 s), so a loaded test machine does not see a job
	// wait past its tests' limits.
	conf := fmt.Sprintf(`ClusterName=mlct%s
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=%d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[3]s
StateSaveLocation=%[4]s/state
SlurmdSpoolDir=%[4]s/spool/%%n
SlurmctldPidFile=%[4]s/slurmctld.pid
SlurmdPidFile=%[4]s/slurmd-%%n.pid
SlurmctldLogFile=%[4]s/slurmctld.log
SlurmdLogFile=%[4]s/slurmd-%%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
ReturnToService=2
MpiDefault=none
SlurmdTimeout=5
SlurmctldTimeout=10
KillWait=5
InactiveLimit=0
MinJobAge=60
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
%sPartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP
`, randHex(3), ports[0], c.MungeSocket(), c.Dir, nodes.String(), Partition, strings.Join(Nodes, ","))
	must(c.t, os.MkdirAll(filepath.Join(c.Dir, "state"), 0o755))
	must(c.t, os.WriteFile(c.Conf, []byte(conf), 0o644))
}

// StartController starts slurmctld; clear starts it without the saved state.
func (c *Cluster) StartController(clear bool) {
	args := []string{"-D", "-f", c.Conf}
	if clear {
		args = append(args, "-c")
	}
	c.ctld = c.daemon("slurmctld", "/usr/sbin/slurmctld", args...)
	c.waitFor("slurmctld to answer", func() bool { return exec.Command("scontrol", "ping").Run() == nil })
}

// StopController stops slurmctld as a restart by an operator does (SIGTERM: it saves its
// state) and waits until it is dead.
func (c *Cluster) StopController() { c.kill(c.ctld, syscall.SIGTERM) }

// StartNode starts the slurmd of node n.
func (c *Cluster) StartNode(n string) {
	must(c.t, os.MkdirAll(filepath.Join(c.Dir, "spool", n), 0o755))
	c.slurmd[n] = c.daemon("slurmd-"+n, "/usr/sbin/slurmd", "-D", "-f", c.Conf, "-N", n)
}

// KillNode kills node n's slurmd with SIGKILL, as a crash, and waits until it is dead.
func (c *Cluster) KillNode(n string) { c.kill(c.slurmd[n], syscall.SIGKILL) }

// daemon starts a daemon in a process group of its own, its output in Dir/<name>.out.
func (c *Cluster) daemon(name, path string, args ...string) *exec.Cmd {
	out, err := os.Create(filepath.Join(c.Dir, name+".out"))
	must(c.t, err)
	defer out.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(c.t, cmd.Start())
	go func() { _ = cmd.Wait() }()
	return cmd
}

// kill signals cmd's process group and waits (10 s at most) until the process is dead.
func (c *Cluster) kill(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	pid := cmd.Process.Pid
	_ = syscall.Kill(-pid, sig)
	deadline := time.Now().Add(10 * time.Second)
	for running(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitIdle waits (30 s at most) until the nodes are idle.
func (c *Cluster) WaitIdle(nodes ...string) {
	c.waitFor("nodes "+strings.Join(nodes, ",")+" idle", func() bool {
		out, err := exec.Command("sinfo", "-h", "-N", "-o", "%N %T").Output()
		if err != nil {
			return false
		}
		idle := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[1] == "idle" {
				idle[f[0]] = true
			}
		}
		for _, n := range nodes {
			if !idle[n] {
				return false
			}
		}
		return true
	})
}

// Resume returns node n to service (after it was set DOWN) and waits until it is idle.
// The resume may be refused: with ReturnToService=2 a node whose slurmd registers again
// may already be back by itself.
func (c *Cluster) Resume(n string) {
	cmd := exec.Command("scontrol", "update", "nodename="+n, "state=resume")
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	_ = cmd.Run()
	c.WaitIdle(n)
}

// Run runs a Slurm command against the cluster and returns its output; it fails the test
// when the command fails.
func (c *Cluster) Run(name string, args ...string) string {
	c.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// Jobs lists the cluster's jobs that are not over, as squeue's "%i %j %T" lines.
func (c *Cluster) Jobs() []string {
	out := strings.TrimSpace(c.Run("squeue", "-h", "-o", "%i %j %T"))
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// Log returns the tail of a daemon's log (slurmctld, slurmd-n1, ...), for failures.
func (c *Cluster) Log(name string) string {
	raw, _ := os.ReadFile(filepath.Join(c.Dir, name+".log"))
	if len(raw) > 4000 {
		raw = raw[len(raw)-4000:]
	}
	return string(raw)
}

// stop cancels every job, then kills the daemons (slurmd first, then slurmctld, then
// munged) and whatever else names the directory.
func (c *Cluster) stop() {
	if c.t.Failed() {
		c.t.Logf("slurmctld log:\n%s", c.Log("slurmctld"))
	}
	if c.ctld != nil && running(c.ctld.Process.Pid) {
		_ = exec.Command("scancel", "--full", "--signal=KILL", "--partition="+Partition).Run()
		_ = exec.Command("scancel", "--partition="+Partition).Run()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			out, err := exec.Command("squeue", "-h", "-o", "%i").Output()
			if err != nil || len(bytes.TrimSpace(out)) == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, n := range Nodes {
		c.kill(c.slurmd[n], syscall.SIGTERM)
	}
	c.kill(c.ctld, syscall.SIGTERM)
	c.kill(c.munged, syscall.SIGTERM)
	killNaming(c.Dir)
}

func (c *Cluster) waitFor(what string, ok func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			c.t.Fatalf("no %s within 30 s; slurmctld log:\n%s", what, c.Log("slurmctld"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePorts returns n distinct TCP ports that were free on loopback a moment ago.
func freePorts(t TB, n int) []int {
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// running reports whether pid is a live process (a zombie is dead).
func running(pid int) bool {
	_, zombie, err := procStat(pid)
	return err == nil && !zombie
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func must(t TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v", err)
	}
}
