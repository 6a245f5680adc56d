//go:build unix

package slurm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

func TestParseJobsReadsSqueueLines(t *testing.T) {
	out := "12|RUNNING|2026-11-23T18:19:40|n2|None|mlc-1/k1|ws/c/k1\n" +
		"13|PENDING|2026-11-23T18:19:41||Resources|mlc-1/k2|ws/c|odd/k2\n" +
		"garbage\n"
	jobs := parseJobs(out)
	if len(jobs) != 2 {
		t.Fatalf("parsed %d jobs, want 2: %+v", len(jobs), jobs)
	}
	if j := jobs[0]; j.ID != "12" || !j.running() || j.Node != "n2" || j.Name != "mlc-1/k1" || j.Comment != "ws/c/k1" {
		t.Fatalf("first job %+v", j)
	}
	if j := jobs[0]; !j.Submit.Equal(time.Date(2026, 11, 23, 18, 19, 40, 0, time.Local)) {
		t.Fatalf("submit time %v", j.Submit)
	}
	if j := jobs[1]; j.running() || !j.live() || j.Reason != "Resources" || j.Comment != "ws/c|odd/k2" {
		t.Fatalf("second job %+v: the comment, last, keeps the separator", j)
	}
}

func TestJobStates(t *testing.T) {
	for state, live := range map[string]bool{
		"PENDING": true, "CONFIGURING": true, "RUNNING": true, "SUSPENDED": true,
		"COMPLETING": false, "CANCELLED": false, "TIMEOUT": false, "NODE_FAIL": false, "PREEMPTED": false, "FAILED": false,
	} {
		if got := (job{State: state}).live(); got != live {
			t.Errorf("live(%s) = %v, want %v", state, got, live)
		}
	}
	if (job{State: "RUNNING"}).running() {
		t.Error("a running job without a node counts as running")
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err             error
		permanent, tran bool
	}{
		{&commandError{name: "sbatch", code: 1, stderr: "sbatch: error: Batch job submission failed: Invalid partition name specified"}, true, false},
		{&commandError{name: "sbatch", code: 1, stderr: "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"}, true, false},
		{&commandError{name: "sbatch", code: 1, stderr: "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"}, false, true},
		{&commandError{name: "squeue", code: 1, stderr: "slurm_load_jobs error: Socket timed out on send/recv operation"}, false, true},
		{&commandError{name: "squeue", code: 127, stderr: "sh: 1: squeue: not found"}, true, false},
		{errors.New("connection reset"), false, true},
	} {
		err := classify(c.err)
		if driver.IsPermanent(err) != c.permanent || driver.IsTransient(err) != c.tran {
			t.Errorf("classify(%v) = permanent %v transient %v; want %v %v", c.err, driver.IsPermanent(err), driver.IsTransient(err), c.permanent, c.tran)
		}
		if !strings.HasPrefix(err.Error(), c.err.Error()) {
			t.Errorf("classify lost the message: %q", err)
		}
	}
}

func TestQuoteArgs(t *testing.T) {
	got := quoteArgs([]string{"sbatch", "--comment=ws/c/k", "--wrap", "exec sleep 1", "it's"})
	want := `sbatch --comment=ws/c/k --wrap 'exec sleep 1' 'it'\''s'`
	if got != want {
		t.Fatalf("quoteArgs = %s, want %s", got, want)
	}
}

func TestLoginMustBeUserAtHost(t *testing.T) {
	for _, login := range []string{"host", "@host", "user@", "user@host:port"} {
		if _, err := newLoginShell(login, "", ""); !driver.IsPermanent(err) {
			t.Errorf("newLoginShell(%q): %v, want a permanent error", login, err)
		}
	}
}
