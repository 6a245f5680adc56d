package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
)

// rawAPI sends hand-written requests to an engine over its unix socket.
type rawAPI struct {
	t    *testing.T
	http *http.Client
}

func newRawAPI(t *testing.T, e *enginetest.Engine) *rawAPI {
	sock := strings.TrimPrefix(e.Endpoint, "unix://")
	return &rawAPI{t: t, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}}
}

// do sends a request and returns the status and, for an error, the decoded API error.
func (r *rawAPI) do(method, path, body string, header http.Header) (int, *api.Error, string) {
	r.t.Helper()
	req, err := http.NewRequest(method, "http://engine"+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := r.http.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var eb api.ErrorBody
	_ = json.Unmarshal(raw, &eb)
	return resp.StatusCode, eb.Error, string(raw)
}

// Every request the API should refuse gets 400 with the field named (where there is one),
// and nothing is created: trailing data, a second object, unknown fields, NUL bytes in a
// job's command or environment, '=' in an environment name, negative log offsets and
// ranks, a bad Idempotency-Key header.
func TestAPIRefusesMalformedInput(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{})
	c := e.Client(t, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{
		Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 2},
	}); err != nil {
		t.Fatal(err)
	}
	job, err := c.SubmitJob(ctx, "lab", api.JobSpec{Compute: "cpu", Command: []string{"echo", "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	raw := newRawAPI(t, e)
	const secret = "hunter2-secret-value"
	tests := []struct {
		name, method, path, body string
		header                   http.Header
		wantField                string
	}{
		{"trailing garbage", "POST", "/v1/workspaces", `{"name":"extra-a"} trailing`, nil, ""},
		{"two objects", "POST", "/v1/workspaces", `{"name":"extra-b"}{"name":"extra-c"}`, nil, ""},
		{"unknown field", "POST", "/v1/workspaces", `{"name":"extra-d","colour":"red"}`, nil, "colour"},
		{"wrong type", "POST", "/v1/workspaces", `{"name":"extra-e","tags":[1]}`, nil, "tags"},
		{"empty body", "POST", "/v1/workspaces", ``, nil, ""},
		{"NUL in command", "POST", "/v1/workspaces/lab/jobs", `{"compute":"cpu","command":["echo","a\u0000b"]}`, nil, "command.1"},
		{"NUL in env value", "POST", "/v1/workspaces/lab/jobs", `{"compute":"cpu","command":["env"],"env":{"TOKEN":"` + secret + `\u0000"}}`, nil, "env.TOKEN"},
		{"= in env name", "POST", "/v1/workspaces/lab/jobs", `{"compute":"cpu","command":["env"],"env":{"A=B":"c"}}`, nil, "env.A=B"},
		{"NUL in env name", "POST", "/v1/workspaces/lab/jobs", `{"compute":"cpu","command":["env"],"env":{"A\u0000":"c"}}`, nil, "env"},
		{"negative log offset", "GET", "/v1/workspaces/lab/jobs/" + job.ID + "/logs?offset=-1", "", nil, "offset"},
		{"negative log rank", "GET", "/v1/workspaces/lab/jobs/" + job.ID + "/logs?rank=-2", "", nil, "rank"},
		{"long idempotency key", "POST", "/v1/workspaces", `{"name":"extra-f"}`, http.Header{api.IdempotencyKeyHeader: {strings.Repeat("k", 300)}}, api.IdempotencyKeyHeader},
		{"idempotency key with a space", "POST", "/v1/workspaces", `{"name":"extra-g"}`, http.Header{api.IdempotencyKeyHeader: {"a b"}}, api.IdempotencyKeyHeader},
		{"probe path with CR LF", "POST", "/v1/workspaces/lab/onlineEndpoints", `{"name":"churn","deployments":{"blue":{"instance_type":"Standard_DS3_v2","instance_count":1,"command":["serve"],"readiness_probe":{"path":"/ready\r\nX-Injected: 1"}}}}`, nil, "deployments.blue.readiness_probe.path"},
		{"NUL in a deployment's env value", "POST", "/v1/workspaces/lab/onlineEndpoints", `{"name":"churn-b","deployments":{"blue":{"instance_type":"Standard_DS3_v2","instance_count":1,"command":["serve"],"environment_variables":{"KEY":"` + secret + `\u0000"}}}}`, nil, "deployments.blue.environment_variables.KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw.t = t
			status, apiErr, body := raw.do(tt.method, tt.path, tt.body, tt.header)
			if status != http.StatusBadRequest || apiErr == nil || apiErr.Code != api.CodeInvalid {
				t.Fatalf("status %d, body %s; want 400 invalid", status, body)
			}
			if apiErr.Field != tt.wantField {
				t.Errorf("field %q; want %q (message: %s)", apiErr.Field, tt.wantField, apiErr.Message)
			}
			if strings.Contains(body, secret) {
				t.Errorf("the error repeats the secret value: %s", body)
			}
		})
	}
	list, err := c.ListWorkspaces(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("workspaces after the refused requests: %+v, %v; want only lab", list, err)
	}
	jobs, err := c.ListJobs(ctx, "lab")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs after the refused requests: %d, %v; want 1", len(jobs), err)
	}
}

// A full disk while storing a code snapshot is the engine's fault: 500 with the cause,
// not 400. The store sits on a small tmpfs (these tests run as root, as the SSH tests do).
func TestSnapshotUploadOnAFullDiskIs500(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test must run as root: it mounts a small tmpfs to fill")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m,nr_inodes=24", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	srv := newServer(t, server.Options{Snapshots: snapshot.NewStore(filepath.Join(mnt, "snapshots"))})
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	for i := range 40 {
		if err := os.WriteFile(filepath.Join(src, "m"+string(rune('A'+i))+".py"), []byte("x = 1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var archive bytes.Buffer
	if _, err := snapshot.Pack(src, &archive, snapshot.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	_, err := c.PutSnapshot(ctx, "lab", archive.Bytes())
	var apiErr *api.Error
	if !asAPIError(err, &apiErr) || apiErr.Status != http.StatusInternalServerError || !strings.Contains(apiErr.Message, "no space left on device") {
		t.Fatalf("upload on a full disk = %v; want 500 naming the cause", err)
	}
}
