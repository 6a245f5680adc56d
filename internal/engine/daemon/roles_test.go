//go:build unix

package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/auth"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestRolesOverTLS runs serve over TLS with the data dir's token file: the token file's
// token makes a contributor and a reader token of one workspace; the contributor applies a
// cluster and submits a job, the reader's submit gets 403 and makes nothing, and the data
// dir's audit log holds both, with no secret in it or in the engine's log.
func TestRolesOverTLS(t *testing.T) {
	dir := shortDir(t)
	logs := &lockedBuffer{}
	// The capacity admits no node of the cluster's size, so the job waits and no node
	// process outlives the test.
	addr := startTCP(t, Options{
		DataDir: dir, Listen: "tcp://127.0.0.1:0", TLS: TLSOptions{On: true}, CapacityVCPUs: 1,
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fileToken, _, _, err := EnsureTokenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	op, err := Connect(ctx, ConnectOptions{Endpoint: "https://" + addr, Token: fileToken, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, spec := range []api.TokenSpec{
		{Name: "ci", Role: api.RoleContributor, Workspaces: []string{"team"}},
		{Name: "viewer", Role: api.RoleReader, Workspaces: []string{"team"}},
	} {
		created, err := op.CreateToken(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, created.Secret)
	}
	ci, err := Connect(ctx, ConnectOptions{Endpoint: "https://" + addr, Token: secrets[0], DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := Connect(ctx, ConnectOptions{Endpoint: "https://" + addr, Token: secrets[1], DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ci.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team"}); err != nil {
		t.Fatalf("the contributor creating its workspace: %v", err)
	}
	if _, err := ci.CreateCompute(ctx, "team", api.ComputeSpec{Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}); err != nil {
		t.Fatalf("the contributor creating a cluster: %v", err)
	}
	job, err := ci.SubmitJob(ctx, "team", api.JobSpec{Compute: "cpu", Command: []string{"true"}})
	if err != nil || job.SubmittedBy != "ci" {
		t.Fatalf("the contributor's job: %+v, %v", job, err)
	}
	_, err = viewer.SubmitJob(ctx, "team", api.JobSpec{Compute: "cpu", Command: []string{"true"}})
	if !api.IsForbidden(err) || !strings.Contains(err.Error(), `lacks the permission write on workspace "team"`) {
		t.Fatalf("the reader's submit: %v; want 403 naming write on team", err)
	}
	if jobs, err := viewer.ListJobs(ctx, "team"); err != nil || len(jobs) != 1 {
		t.Fatalf("jobs the reader sees: %d, %v; want the contributor's one", len(jobs), err)
	}

	raw, err := os.ReadFile(filepath.Join(dir, auth.AuditFile))
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(filepath.Join(dir, auth.AuditFile)); info.Mode().Perm() != 0o600 {
		t.Errorf("audit.log mode %v; want 0600", info.Mode().Perm())
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var e api.AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		lines = append(lines, e.Token+" "+e.Result+" "+e.Action)
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		"token-file allowed POST /v1/tokens",
		"ci allowed POST /v1/workspaces",
		"ci allowed POST /v1/workspaces/{workspace}/computes",
		"ci allowed POST /v1/workspaces/{workspace}/jobs",
		"viewer denied POST /v1/workspaces/{workspace}/jobs",
	} {
		if !strings.Contains(all, want+"\n") && !strings.HasSuffix(all, want) {
			t.Errorf("audit.log lacks %q:\n%s", want, all)
		}
	}
	for _, s := range append(secrets, fileToken) {
		if bytes.Contains(raw, []byte(s)) || strings.Contains(logs.String(), s) {
			t.Error("a token's secret is in audit.log or the engine's log")
		}
	}
}
