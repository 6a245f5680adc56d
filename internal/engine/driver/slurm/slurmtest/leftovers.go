//go:build unix

package slurmtest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// A test process that is killed runs no cleanup, and its cluster outlives it: munged,
// slurmctld, the slurmd, their slurmstepd and job processes, and the directory. Each
// cluster keeps a record (written before anything starts) of its directory and owner, and
// every Start first removes what the records of dead owners name.

// registryDir holds one record per live cluster.
func registryDir() string { return filepath.Join(os.TempDir(), "mlcompute-slurmtest") }

// record is one cluster: its directory, and the test process (pid and start time, since a
// pid alone may have been reused) that started it.
type record struct {
	Owner      int    `json:"owner"`
	OwnerStart uint64 `json:"owner_start"`
	Dir        string `json:"dir"`
}

func (r record) path() string { return filepath.Join(registryDir(), filepath.Base(r.Dir)+".json") }

// save writes the record whole (a temporary file renamed), so a sweep never reads half.
func (r record) save(t TB) {
	t.Helper()
	must(t, os.MkdirAll(registryDir(), 0o700))
	raw, err := json.Marshal(r)
	must(t, err)
	tmp := r.path() + ".tmp"
	must(t, os.WriteFile(tmp, raw, 0o600))
	must(t, os.Rename(tmp, r.path()))
}

// sweepLeftovers removes the clusters of dead test processes.
func sweepLeftovers(t TB) {
	paths, _ := filepath.Glob(filepath.Join(registryDir(), "*.json"))
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r record
		if err := json.Unmarshal(raw, &r); err != nil || r.Dir == "" || !strings.Contains(filepath.Base(r.Dir), "mlc-slurm-") {
			_ = os.Remove(p)
			continue
		}
		if start, err := startTime(r.Owner); err == nil && running(r.Owner) && start == r.OwnerStart {
			continue
		}
		t.Logf("removing the Slurm cluster a dead test process (pid %d) left: %s", r.Owner, r.Dir)
		killNaming(r.Dir)
		_ = os.RemoveAll(r.Dir)
		_ = os.Remove(p)
	}
}

// killNaming SIGKILLs every live process whose command line or environment names dir
// (the daemons by their arguments; slurmstepd and job processes by SLURM_CONF), twice
// over a short interval, since a dying slurmd may still start a step.
func killNaming(dir string) {
	want := []byte(dir + "/")
	self := os.Getpid()
	for range 2 {
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range procs {
			pid, err := strconv.Atoi(filepath.Base(p))
			if err != nil || pid == self || !running(pid) {
				continue
			}
			cmdline, _ := os.ReadFile(p + "/cmdline")
			environ, _ := os.ReadFile(p + "/environ")
			if bytes.Contains(cmdline, want) || bytes.Contains(environ, []byte("SLURM_CONF="+dir+"/")) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startTime is field 22 of /proc/<pid>/stat.
func startTime(pid int) (uint64, error) {
	start, _, err := procStat(pid)
	return start, err
}

// procStat reads a process's start time and whether it is a zombie (proc.ReadStat).
func procStat(pid int) (start uint64, zombie bool, err error) {
	st, err := proc.ReadStat(pid)
	return st.Start, st.State == 'Z', err
}

// naming lists the live processes killNaming would kill.
func naming(dir string) []int {
	want := []byte(dir + "/")
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil || pid == os.Getpid() || !running(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(p + "/cmdline")
		environ, _ := os.ReadFile(p + "/environ")
		if bytes.Contains(cmdline, want) || bytes.Contains(environ, []byte("SLURM_CONF="+dir+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids
}
