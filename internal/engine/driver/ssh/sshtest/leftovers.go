//go:build unix

package sshtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// A test process that is killed (SIGKILL, a cut-off CI job) runs no cleanup, and what its
// hosts made outlives it: a user with a home, a namespace, a veth pair, a route, an sshd.
// So each host keeps a record of what it makes, written before each thing is made, and
// every Start first removes what the records of dead test processes name.

// sweepLockPath is the lock that test processes share for the sweep and the subnet choice.
func sweepLockPath() string { return filepath.Join(os.TempDir(), "mlcompute-sshtest.lock") }

// registryDir holds one record per live host.
func registryDir() string { return filepath.Join(os.TempDir(), "mlcompute-sshtest") }

// hostRecord is what one host made (its sshd is found by its config file, in Dir). Owner and its start time tell whether the test process
// that made it still runs (a pid alone could have been reused).
type hostRecord struct {
	Owner      int      `json:"owner"`
	OwnerStart uint64   `json:"owner_start"`
	User       string   `json:"user"`
	Dir        string   `json:"dir"`
	Namespace  string   `json:"namespace,omitempty"`
	HostLink   string   `json:"host_link,omitempty"`
	Routes     []string `json:"routes,omitempty"`
}

func (r hostRecord) path() string { return filepath.Join(registryDir(), r.User+".json") }

// save writes the record; the file is replaced whole, so a sweep never reads half of one.
func (r hostRecord) save(t testing.TB) {
	t.Helper()
	must(t, os.MkdirAll(registryDir(), 0o700))
	raw, err := json.Marshal(r)
	must(t, err)
	tmp := r.path() + ".tmp"
	must(t, os.WriteFile(tmp, raw, 0o600))
	must(t, os.Rename(tmp, r.path()))
}

// sweepLeftovers removes what hosts of dead test processes made. It runs under the lock
// the hosts' subnet choice uses, so two Starts never sweep the same record at once.
func sweepLeftovers(t testing.TB) {
	t.Helper()
	unlock, err := lockFile(sweepLockPath())
	must(t, err)
	defer unlock()
	paths, _ := filepath.Glob(filepath.Join(registryDir(), "*.json"))
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r hostRecord
		if err := json.Unmarshal(raw, &r); err != nil || r.User == "" {
			t.Logf("removing unreadable sshtest record %s", p)
			_ = os.Remove(p)
			continue
		}
		if alive(r.Owner, r.OwnerStart) {
			continue
		}
		t.Logf("removing what a dead test process (pid %d) left: user %s, namespace %q, %s", r.Owner, r.User, r.Namespace, r.Dir)
		r.remove()
		_ = os.Remove(p)
	}
}

// remove undoes everything the record names; each step tolerates a thing that is gone.
func (r hostRecord) remove() {
	for _, pid := range r.sshds() {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // sshd runs in a process group of its own
	}
	_ = exec.Command("pkill", "-KILL", "-u", r.User).Run()
	_ = exec.Command("userdel", "-f", "-r", r.User).Run()
	for _, route := range r.Routes {
		_ = exec.Command("ip", "route", "del", "unreachable", route).Run()
	}
	if r.HostLink != "" {
		_ = exec.Command("ip", "link", "del", r.HostLink).Run()
	}
	if r.Namespace != "" {
		_ = exec.Command("ip", "netns", "del", r.Namespace).Run()
	}
	if r.Dir != "" {
		_ = os.RemoveAll(r.Dir)
	}
}

// sshds lists the live processes whose command line names the host's sshd_config: its
// sshd, found so even when the test process died before it learnt sshd's pid.
func (r hostRecord) sshds() []int {
	want := []byte(filepath.Join(r.Dir, "sshd_config"))
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, want) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		if _, zombie, err := procStat(pid); err == nil && !zombie {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid runs (a zombie does not) and is the process that started at
// start (clock ticks since boot, as /proc/<pid>/stat gives it).
func alive(pid int, start uint64) bool {
	got, zombie, err := procStat(pid)
	return err == nil && !zombie && got == start
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
