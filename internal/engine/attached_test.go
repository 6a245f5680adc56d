//go:build unix

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh/sshtest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/syncbuf"
)

// These tests run the engine (fake clock, fake driver for cluster nodes) with the real ssh
// driver against real sshd test hosts.

func (r *rig) attach(ws, name string, vm api.VirtualMachine) (*api.Compute, error) {
	return r.e.CreateCompute(context.Background(), ws, api.ComputeSpec{Name: name, Type: api.TypeAttached, VirtualMachine: &vm}, "")
}

func keyVM(h *sshtest.Host) api.VirtualMachine {
	return api.VirtualMachine{Address: h.Address, SSHPort: int64(h.Port), Username: h.User, PrivateKey: h.KeyPEM}
}

func (r *rig) submitCmd(ws, compute string, cmd ...string) *api.Job {
	r.t.Helper()
	j, err := r.e.SubmitJob(context.Background(), ws, api.JobSpec{Compute: compute, Command: cmd}, "")
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *rig) logs(ws, id string) string {
	r.t.Helper()
	out, _, _, err := r.e.JobLogs(context.Background(), ws, id, 0, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	return string(out)
}

// gatedJob waits for a file, then prints where it ran and exits with code.
func gatedJob(gate string, code int) []string {
	return []string{"sh", "-c", `echo "on $SSH_CONNECTION"; while [ ! -f "$1" ]; do sleep 0.05; done; echo after; exit ` + strconv.Itoa(code), "sh", gate}
}

func TestAttachedComputeRunsJobsThroughDropsAndRestarts(t *testing.T) {
	h := sshtest.Start(t)
	r := newRig(t)
	r.workspace("wsa", nil)

	c, err := r.attach("wsa", "box", keyVM(h))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("nproc").Output()
	nproc, _ := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	vm := c.VirtualMachine
	if c.Type != api.TypeAttached || vm == nil || vm.HostKeyFingerprint != h.Fingerprint || vm.VCPUs != nproc || vm.MemoryGB <= 0 || vm.SSHPort != int64(h.Port) {
		t.Fatalf("attached compute %+v / %+v: want the pinned host key %s, %d vCPUs, memory", c, vm, h.Fingerprint, nproc)
	}
	raw, _ := json.Marshal(c)
	if strings.Contains(string(raw), "PRIVATE KEY") || vm.PrivateKey != "" || vm.Password != "" {
		t.Fatalf("the API returns the machine's secret: %s", raw)
	}
	r.eventuallySSH("the machine's node is idle", func() bool {
		c := r.compute("wsa", "box")
		return len(c.Nodes) == 1 && c.Nodes[0].State == api.NodeIdle && strings.HasPrefix(c.Nodes[0].ID, model.AttachedNodePrefix)
	})
	if r.e.HasWork() {
		t.Fatal("an idle attached machine keeps the engine from exiting")
	}
	if _, err := r.e.SubmitJob(context.Background(), "wsa", api.JobSpec{Compute: "box", InstanceCount: 2, Command: []string{"true"}}, ""); !isField(err, "instance_count") {
		t.Fatalf("a 2-node job on one machine: %v, want refused on instance_count", err)
	}

	// The connection drops while the job runs: its status and output still arrive.
	gate1 := filepath.Join(h.Home, "gate1")
	j1 := r.submitCmd("wsa", "box", gatedJob(gate1, 3)...)
	r.eventuallySSH("job 1 running", r.status("wsa", j1.ID, api.JobRunning))
	r.eventuallySSH("an SSH connection to drop", func() bool { return h.DropConnections(t) > 0 })
	must(t, os.WriteFile(gate1, nil, 0o644))
	r.eventuallySSH("job 1 failed", r.status("wsa", j1.ID, api.JobFailed))
	if got := r.job("wsa", j1.ID); got.ExitCode == nil || *got.ExitCode != 3 {
		t.Fatalf("job 1 exit code %v, want 3", got.ExitCode)
	}
	if logs := r.logs("wsa", j1.ID); !strings.Contains(logs, " "+h.Address+" ") || !strings.HasSuffix(logs, "after\n") {
		t.Fatalf("job 1 output %q: want it to show it ran on %s and ended", logs, h.Address)
	}

	// The engine restarts while a job runs: it re-attaches and learns how the job ended.
	gate2 := filepath.Join(h.Home, "gate2")
	j2 := r.submitCmd("wsa", "box", gatedJob(gate2, 0)...)
	r.eventuallySSH("job 2 running", r.status("wsa", j2.ID, api.JobRunning))
	r.stop()
	must(t, os.WriteFile(gate2, nil, 0o644))
	r.start()
	r.eventuallySSH("job 2 completed after the restart", r.status("wsa", j2.ID, api.JobCompleted))
	if logs := r.logs("wsa", j2.ID); !strings.HasSuffix(logs, "after\n") {
		t.Fatalf("job 2 output %q", logs)
	}

	// A job still running at the restart is watched again, and ends on its own.
	gate3 := filepath.Join(h.Home, "gate3")
	j3 := r.submitCmd("wsa", "box", gatedJob(gate3, 0)...)
	r.eventuallySSH("job 3 running", r.status("wsa", j3.ID, api.JobRunning))
	r.stop()
	r.start()
	must(t, os.WriteFile(gate3, nil, 0o644))
	r.eventuallySSH("job 3 completed", r.status("wsa", j3.ID, api.JobCompleted))

	// Detaching cancels the running job (its process group dies) and leaves the machine's
	// files alone.
	j4 := r.submitCmd("wsa", "box", "sleep", "300")
	r.eventuallySSH("job 4 running", r.status("wsa", j4.ID, api.JobRunning))
	node := r.compute("wsa", "box").Nodes[0].ID
	taskDir := filepath.Join(h.Home, ".mlcompute/tasks", node+"."+j4.ID+".0-0")
	pgid := readPid(t, filepath.Join(taskDir, "pid"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(t, r.e.DeleteCompute(ctx, "wsa", "box"))
	if got := r.job("wsa", j4.ID).Status; got != api.JobCanceled {
		t.Fatalf("job 4 is %s after detaching, want Canceled", got)
	}
	r.eventuallySSH("job 4's process group gone", func() bool { return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) })
	if _, err := os.Stat(filepath.Join(taskDir, "output.log")); err != nil {
		t.Fatalf("detaching removed files from the machine: %v", err)
	}
}

// TestAttachedNodeLeftPreparingIsCreatedAfterRestart: the engine stopped while the
// machine's node was being created (committed Preparing, admitted, outcome never
// recorded). After the restart the node is created again and runs the queued job, rather
// than staying Preparing and blocking the compute's only node.
func TestAttachedNodeLeftPreparingIsCreatedAfterRestart(t *testing.T) {
	h := sshtest.Start(t)
	r := newRig(t)
	r.workspace("wsa", nil)
	if _, err := r.attach("wsa", "box", keyVM(h)); err != nil {
		t.Fatal(err)
	}
	r.eventuallySSH("the machine's node is idle", func() bool {
		c := r.compute("wsa", "box")
		return len(c.Nodes) == 1 && c.Nodes[0].State == api.NodeIdle
	})
	r.stop()
	st, err := store.Open(r.path, time.Second)
	must(t, err)
	must(t, st.Update(func(tx *store.Tx) error {
		nodes, err := store.List[model.Node](tx, store.Nodes, "wsa/box/")
		if err != nil || len(nodes) != 1 || !nodes[0].Admitted {
			t.Fatalf("stored nodes %+v (%v), want one admitted node", nodes, err)
		}
		n := nodes[0]
		n.State, n.IdleSince = api.NodePreparing, time.Time{}
		return tx.Put(store.Nodes, n.Key(), n)
	}))
	must(t, st.Close())
	r.start()
	j := r.submitCmd("wsa", "box", "true")
	r.eventuallySSH("the job completed on the node created again", r.status("wsa", j.ID, api.JobCompleted))
}

// TestAttachedJobEndedWhileDownIsLearnedOnceMachineAnswers: a job ends while the engine is
// down, and the engine starts while the machine cannot be reached. The job stays running
// until the machine answers, then completes with its true exit code.
func TestAttachedJobEndedWhileDownIsLearnedOnceMachineAnswers(t *testing.T) {
	h := sshtest.Start(t)
	if h.Namespace == "" {
		t.Skip("the host runs on loopback (no network namespaces): it cannot be made unreachable")
	}
	r := newRig(t)
	r.workspace("wsa", nil)
	if _, err := r.attach("wsa", "box", keyVM(h)); err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(h.Home, "gate")
	j := r.submitCmd("wsa", "box", gatedJob(gate, 0)...)
	r.eventuallySSH("job running", r.status("wsa", j.ID, api.JobRunning))
	node := r.compute("wsa", "box").Nodes[0].ID
	r.stop()
	must(t, os.WriteFile(gate, nil, 0o644))
	exitFile := filepath.Join(h.Home, ".mlcompute/tasks", node+"."+j.ID+".0-0", "exit_code")
	r.eventuallySSH("the task recorded its exit", func() bool { _, err := os.Stat(exitFile); return err == nil })

	h.SetUnreachable(t, true)
	r.start()
	r.settle()
	if got := r.job("wsa", j.ID).Status; got != api.JobRunning {
		t.Fatalf("job is %s while its machine cannot be reached, want Running", got)
	}
	h.SetUnreachable(t, false)
	r.eventuallySSH("job completed once the machine answers", r.status("wsa", j.ID, api.JobCompleted))
	if logs := r.logs("wsa", j.ID); !strings.HasSuffix(logs, "after\n") {
		t.Fatalf("job output %q", logs)
	}
}

func TestAttachFailuresNameTheSettingAndRecordNothing(t *testing.T) {
	h := sshtest.Start(t)
	r := newRig(t)
	r.workspace("wsa", nil)

	wrongPassword := api.VirtualMachine{Address: h.Address, SSHPort: int64(h.Port), Username: h.User, Password: "not-" + h.Password}
	closedPort := keyVM(h)
	closedPort.SSHPort = int64(h.ClosedPort(t))
	mismatch := keyVM(h)
	mismatch.HostKeyFingerprint = "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"
	darwin := keyVM(h)
	darwin.PrivateKey = h.DarwinKey
	both := keyVM(h)
	both.Password = h.Password

	for _, tc := range []struct {
		name, field, says string
		vm                api.VirtualMachine
	}{
		{"WrongPassword", "virtual_machine.password", "authentication", wrongPassword},
		{"ClosedPort", "virtual_machine.ssh_port", "refused", closedPort},
		{"HostKeyMismatch", "virtual_machine.host_key_fingerprint", h.Fingerprint, mismatch},
		{"NotLinux", "virtual_machine.address", "Darwin", darwin},
		{"BothCredentials", "virtual_machine.private_key", "exactly one", both},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.attach("wsa", "box", tc.vm)
			if !isField(err, tc.field) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an error on %s saying %q", err, tc.field, tc.says)
			}
			if strings.Contains(err.Error(), h.Password) {
				t.Fatalf("the message shows the password: %v", err)
			}
		})
	}
	if h.Namespace != "" {
		t.Run("Unreachable", func(t *testing.T) {
			h.SetUnreachable(t, true)
			defer h.SetUnreachable(t, false)
			_, err := r.attach("wsa", "box", keyVM(h))
			if !isField(err, "virtual_machine.address") || !strings.Contains(err.Error(), "unreachable") {
				t.Fatalf("got %v, want unreachable on virtual_machine.address", err)
			}
		})
	}
	list, err := r.e.ListComputes(context.Background(), "wsa")
	if err != nil || len(list) != 0 {
		t.Fatalf("failed attaches left %v (%v)", list, err)
	}

	// A password that works, then a rotation to a wrong one is refused and changes nothing.
	good := api.VirtualMachine{Address: h.Address, SSHPort: int64(h.Port), Username: h.User, Password: h.Password}
	if _, err := r.attach("wsa", "box", good); err != nil {
		t.Fatal(err)
	}
	rotated := good
	rotated.Password = "rotated-wrong"
	if _, err := r.e.UpdateCompute(context.Background(), "wsa", "box", api.ComputeUpdate{Description: "x", VirtualMachine: &rotated}); !isField(err, "virtual_machine.password") {
		t.Fatalf("rotating to a wrong password: %v", err)
	}
	moved := good
	moved.Address = "10.0.0.1"
	if _, err := r.e.UpdateCompute(context.Background(), "wsa", "box", api.ComputeUpdate{VirtualMachine: &moved}); !isField(err, "virtual_machine.address") {
		t.Fatalf("changing the address in place: %v", err)
	}
	c, err := r.e.UpdateCompute(context.Background(), "wsa", "box", api.ComputeUpdate{Description: "rotated", VirtualMachine: &api.VirtualMachine{
		Address: h.Address, SSHPort: int64(h.Port), Username: h.User, PrivateKey: h.KeyPEM}})
	if err != nil || c.Description != "rotated" {
		t.Fatalf("rotating to a key: %+v, %v", c, err)
	}

	// Detaching a machine that cannot be reached any more still succeeds.
	if h.Namespace != "" {
		h.SetUnreachable(t, true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := r.e.DeleteCompute(ctx, "wsa", "box"); err != nil {
		t.Fatalf("detaching: %v", err)
	}
}

func isField(err error, field string) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Field == field
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	must(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	must(t, err)
	return pid
}

// TestAttachedSecretsNeverLogged runs attaches that succeed and fail, a job, a dropped
// connection and a detach with the engine logging at trace level, and checks that no
// password or private key reaches the log.
func TestAttachedSecretsNeverLogged(t *testing.T) {
	h := sshtest.Start(t)
	var logs syncbuf.Buffer
	st := storetest.Open(t, t.TempDir())
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e, err := New(Config{Store: st, Clock: clk, Driver: fake.New(clk), DataDir: t.TempDir(),
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: &logs})})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must(t, e.Start(ctx))
	_, err = e.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "wsa"}, "")
	must(t, err)

	attach := func(name string, vm api.VirtualMachine) error {
		_, err := e.CreateCompute(ctx, "wsa", api.ComputeSpec{Name: name, Type: api.TypeAttached, VirtualMachine: &vm}, "")
		return err
	}
	if err := attach("bad", api.VirtualMachine{Address: h.Address, SSHPort: int64(h.Port), Username: h.User, Password: "wrong-" + h.Password}); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	must(t, attach("pw-box", api.VirtualMachine{Address: h.Address, SSHPort: int64(h.Port), Username: h.User, Password: h.Password}))
	must(t, attach("key-box", keyVM(h)))
	gate := filepath.Join(h.Home, "secret-gate")
	j, err := e.SubmitJob(ctx, "wsa", api.JobSpec{Compute: "key-box", Command: gatedJob(gate, 0)}, "")
	must(t, err)
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(sshWait); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never reached: %s", what)
			}
		}
	}
	status := func() string { got, _ := e.GetJob(ctx, "wsa", j.ID); return got.Status }
	wait("job running", func() bool { return status() == api.JobRunning })
	wait("a connection to drop", func() bool { return h.DropConnections(t) > 0 })
	must(t, os.WriteFile(gate, nil, 0o644))
	wait("job completed", func() bool { return status() == api.JobCompleted })
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	must(t, e.DeleteCompute(dctx, "wsa", "pw-box"))
	must(t, e.DeleteCompute(dctx, "wsa", "key-box"))

	out := logs.String()
	if !strings.Contains(out, "machine attached") {
		t.Fatalf("the log lacks the attach lines, so this test checks nothing:\n%s", out)
	}
	keyBody := strings.Split(strings.TrimSpace(h.KeyPEM), "\n")[1]
	for _, secret := range []string{h.Password, keyBody, "PRIVATE KEY"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the engine's log shows a secret (%.12s...):\n%s", secret, out)
		}
	}
}
