//go:build unix

package enginetest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// On local nodes a job's follower is woken by the task's writes (inotify) and by the job's
// changes in the store: it gets the output a piece at a time as it is printed, the second
// piece only after the first was delivered (the task waits for the test in between), and
// it returns once the job has ended, with the offset after the last byte.
func TestFollowJobLogsOnLocalNodesDeliversEachWrite(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := enginetest.Start(t, enginetest.Options{AgentArgv: []string{exe, "node-agent"}})
	c := e.Client(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "logs"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "logs", api.ComputeSpec{Name: "cpu", VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "trigger")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Followed from submission: the job is queued, then gets its node, then runs.
	j, err := c.SubmitJob(ctx, "logs", api.JobSpec{Compute: "cpu", Env: map[string]string{"TRIGGER": fifo},
		Command: []string{"sh", "-c", `echo first; read line < "$TRIGGER"; echo "$line"`}})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		chunks []string
		once   sync.Once
	)
	next, err := e.FollowJobLogs(ctx, "logs", j.ID, 0, 0, func(data []byte) error {
		mu.Lock()
		chunks = append(chunks, string(data))
		all := strings.Join(chunks, "")
		mu.Unlock()
		if strings.Contains(all, "first\n") {
			once.Do(func() {
				// The task blocks on the FIFO until the follower has delivered "first".
				go func() { _ = os.WriteFile(fifo, []byte("second\n"), 0o600) }()
			})
		}
		return nil
	})
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	if all := strings.Join(chunks, ""); all != "first\nsecond\n" || next != int64(len(all)) {
		t.Fatalf("followed %q (chunks %q), next offset %d", all, chunks, next)
	}
	if chunks[0] != "first\n" {
		t.Fatalf("the first chunk is %q, want the first line alone", chunks[0])
	}
	got, err := c.GetJob(ctx, "logs", j.ID)
	if err != nil || got.Status != api.JobCompleted {
		t.Fatalf("job after the follow: %+v %v", got, err)
	}
}
