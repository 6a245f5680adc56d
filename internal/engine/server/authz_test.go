package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/auth"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/syncbuf"
)

// authRig is an engine (manual mode, fake clock and driver) served over TCP with the token
// file's token, the store's tokens, an audit log, metrics and a log kept in memory.
type authRig struct {
	t         *testing.T
	eng       *engine.Engine
	clk       *clocktesting.FakeClock
	url       string
	auditPath string
	logs      *syncbuf.Buffer
	op        *client.Client // the token file's token
}

const fileToken = "file-token-s3cret"

func newAuthRig(t *testing.T) *authRig {
	t.Helper()
	dir := t.TempDir()
	st := storetest.Open(t, dir)
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	logs := &syncbuf.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})
	eng, err := engine.New(engine.Config{Store: st, Clock: clk, Driver: fake.New(clk), Manual: true, Version: "test", DataDir: dir, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.OpenTokens(st, clk)
	if err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(dir, auth.AuditFile)
	audit, err := auth.OpenAudit(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = audit.Close() })
	m := metrics.New(metrics.Options{Source: eng})
	srv := httptest.NewServer(server.New(server.Options{
		Engine: eng, Logger: logger, Token: fileToken, Tokens: tokens, Audit: audit, Metrics: m, Clock: clk,
	}))
	t.Cleanup(srv.Close)
	r := &authRig{t: t, eng: eng, clk: clk, url: srv.URL, auditPath: auditPath, logs: logs}
	r.op = r.client(fileToken)
	return r
}

func (r *authRig) client(token string) *client.Client {
	return newClient(r.t, r.url, token, client.WithAttempts(1))
}

// token makes a token with the token file's operator token and returns its secret.
func (r *authRig) token(name, role string, workspaces ...string) string {
	r.t.Helper()
	created, err := r.op.CreateToken(context.Background(), api.TokenSpec{Name: name, Role: role, Workspaces: workspaces})
	if err != nil {
		r.t.Fatalf("creating token %s: %v", name, err)
	}
	if !strings.HasPrefix(created.Secret, "mlc_") || created.Role != role {
		r.t.Fatalf("created = %+v", created.Token)
	}
	return created.Secret
}

func (r *authRig) audit() []api.AuditEntry {
	r.t.Helper()
	entries, err := r.op.Audit(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return entries
}

func wantForbidden(t *testing.T, err error, permission string) {
	t.Helper()
	if !api.IsForbidden(err) {
		t.Fatalf("want 403 forbidden, got %v", err)
	}
	var apiErr *api.Error
	if !errorsAs(err, &apiErr) || apiErr.Status != http.StatusForbidden || !strings.Contains(apiErr.Message, "lacks the permission "+permission) {
		t.Fatalf("want a 403 naming the permission %q, got %v", permission, err)
	}
}

func errorsAs(err error, target **api.Error) bool {
	e, ok := err.(*api.Error)
	if ok {
		*target = e
	}
	return ok
}

func hasEntry(entries []api.AuditEntry, token, action, result string, status int) bool {
	for _, e := range entries {
		if e.Token == token && e.Action == action && e.Result == result && e.Status == status {
			return true
		}
	}
	return false
}

func clusterSpec(name string) api.ComputeSpec {
	return api.ComputeSpec{Name: name, Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}
}

func TestTokenRolesAndWorkspaces(t *testing.T) {
	r := newAuthRig(t)
	ctx := context.Background()
	for _, ws := range []string{"team-a", "team-b"} {
		if _, err := r.op.CreateWorkspace(ctx, api.WorkspaceSpec{Name: ws}); err != nil {
			t.Fatal(err)
		}
	}
	contribA := r.client(r.token("ci-a", api.RoleContributor, "team-a"))
	readerA := r.client(r.token("viewer-a", api.RoleReader, "team-a"))
	contribAll := r.client(r.token("ci-all", api.RoleContributor))

	// A contributor of team-a creates a cluster and submits a job there.
	if _, err := contribA.CreateCompute(ctx, "team-a", clusterSpec("cpu")); err != nil {
		t.Fatalf("contributor creating a cluster in its workspace: %v", err)
	}
	job, err := contribA.SubmitJob(ctx, "team-a", api.JobSpec{Compute: "cpu", Command: []string{"train"}})
	if err != nil {
		t.Fatalf("contributor submitting a job: %v", err)
	}
	if job.SubmittedBy != "ci-a" {
		t.Fatalf("submitted_by = %q, want ci-a", job.SubmittedBy)
	}
	if got, err := readerA.GetJob(ctx, "team-a", job.ID); err != nil || got.SubmittedBy != "ci-a" {
		t.Fatalf("reader reading the job: %+v, %v", got, err)
	}

	// The same token on team-b: 403 naming the permission, and nothing made.
	_, err = contribA.CreateCompute(ctx, "team-b", clusterSpec("cpu"))
	wantForbidden(t, err, `write on workspace "team-b"`)
	_, err = contribA.GetWorkspace(ctx, "team-b")
	wantForbidden(t, err, `read on workspace "team-b"`)
	_, err = contribA.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team-c"})
	wantForbidden(t, err, `write on workspace "team-c"`)
	if list, err := r.op.ListComputes(ctx, "team-b"); err != nil || len(list) != 0 {
		t.Fatalf("team-b computes = %v, %v; want none", list, err)
	}
	if _, err := r.op.GetWorkspace(ctx, "team-c"); !api.IsNotFound(err) {
		t.Fatalf("team-c after a denied create: %v", err)
	}
	// A scoped token lists only its workspaces; an unscoped one creates any.
	if list, err := contribA.ListWorkspaces(ctx); err != nil || len(list) != 1 || list[0].Name != "team-a" {
		t.Fatalf("contributor of team-a lists %v, %v", list, err)
	}
	if _, err := contribAll.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team-c"}); err != nil {
		t.Fatalf("unscoped contributor creating a workspace: %v", err)
	}

	// A reader that submits a job: 403, and no job is made.
	_, err = readerA.SubmitJob(ctx, "team-a", api.JobSpec{Compute: "cpu", Command: []string{"rm", "-rf", "/"}})
	wantForbidden(t, err, `write on workspace "team-a"`)
	if jobs, err := r.op.ListJobs(ctx, "team-a"); err != nil || len(jobs) != 1 {
		t.Fatalf("jobs after the reader's submit = %d, %v; want the contributor's one", len(jobs), err)
	}
	err = readerA.DeleteCompute(ctx, "team-a", "cpu")
	wantForbidden(t, err, `write on workspace "team-a"`)

	// Tokens and the engine are the operators'.
	_, err = contribAll.ListTokens(ctx)
	wantForbidden(t, err, "admin")
	_, err = contribA.CreateToken(ctx, api.TokenSpec{Name: "mine", Role: api.RoleOperator})
	wantForbidden(t, err, "admin")
	wantForbidden(t, contribAll.Shutdown(ctx), "admin")
	_, err = readerA.Audit(ctx)
	wantForbidden(t, err, "admin")

	// The audit log holds the allowed changes and the denials, by token name.
	entries := r.audit()
	for _, want := range []struct {
		token, action, result string
		status                int
	}{
		{"ci-a", "POST /v1/workspaces/{workspace}/computes", "allowed", 201},
		{"ci-a", "POST /v1/workspaces/{workspace}/jobs", "allowed", 201},
		{"ci-a", "POST /v1/workspaces/{workspace}/computes", "denied", 403},
		{"ci-a", "GET /v1/workspaces/{workspace}", "denied", 403},
		{"viewer-a", "POST /v1/workspaces/{workspace}/jobs", "denied", 403},
		{"ci-all", "POST /v1/workspaces", "allowed", 201},
		{"token-file", "POST /v1/tokens", "allowed", 201},
		{"ci-all", "POST /v1/shutdown", "denied", 403},
	} {
		if !hasEntry(entries, want.token, want.action, want.result, want.status) {
			t.Errorf("audit log lacks %+v; it holds %+v", want, entries)
		}
	}
	for _, e := range entries {
		if e.Token == "ci-a" && e.Action == "POST /v1/workspaces/{workspace}/jobs" && e.Target != "/v1/workspaces/team-a/jobs/"+job.ID {
			t.Errorf("job submit's target = %q, want the job", e.Target)
		}
		if e.Result == "denied" && !strings.Contains(e.Reason, "lacks the permission") {
			t.Errorf("denial without its reason: %+v", e)
		}
		if e.Action == "GET /v1/workspaces/{workspace}/jobs/{job}" && e.Result == "allowed" {
			t.Errorf("an allowed read is in the audit log: %+v", e)
		}
	}
}

func TestOperatorManagesTokens(t *testing.T) {
	r := newAuthRig(t)
	ctx := context.Background()
	op2 := r.client(r.token("ops", api.RoleOperator))
	created, err := op2.CreateToken(ctx, api.TokenSpec{Name: "temp", Role: api.RoleReader, Workspaces: []string{"ws2", "ws1", "ws1"}})
	if err != nil {
		t.Fatal(err)
	}
	if created.CreatedBy != "ops" || strings.Join(created.Workspaces, ",") != "ws1,ws2" {
		t.Fatalf("created = %+v", created.Token)
	}
	temp := r.client(created.Secret)
	if _, err := temp.Status(ctx); err != nil {
		t.Fatalf("a new token: %v", err)
	}
	_, err = op2.CreateToken(ctx, api.TokenSpec{Name: "temp", Role: api.RoleReader})
	if !api.IsConflict(err) {
		t.Fatalf("a second token named temp: %v", err)
	}
	_, err = op2.CreateToken(ctx, api.TokenSpec{Name: "x", Role: "admin"})
	if !api.IsInvalid(err) || api.FieldOf(err) != "role" || !strings.Contains(err.Error(), "reader, contributor, operator") {
		t.Fatalf("a bad role: %v", err)
	}

	list, err := op2.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tok := range list {
		names = append(names, tok.Name+":"+tok.Role)
	}
	if got := strings.Join(names, ","); got != "token-file:operator,ops:operator,temp:reader" {
		t.Fatalf("tokens = %s", got)
	}

	if err := op2.RevokeToken(ctx, "temp"); err != nil {
		t.Fatal(err)
	}
	if _, err := temp.Status(ctx); !api.IsUnauthorized(err) {
		t.Fatalf("a revoked token: %v, want 401", err)
	}
	if err := op2.RevokeToken(ctx, "temp"); !api.IsNotFound(err) {
		t.Fatalf("revoking twice: %v", err)
	}
	if err := op2.RevokeToken(ctx, api.TokenFileName); !api.IsInvalid(err) || !strings.Contains(err.Error(), "api.token") {
		t.Fatalf("revoking the token file's token: %v", err)
	}

	// An expired token gets 401 naming it, and the denial is audited.
	exp, err := op2.CreateToken(ctx, api.TokenSpec{Name: "short", Role: api.RoleContributor, ExpiresInSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	short := r.client(exp.Secret)
	if _, err := short.ListWorkspaces(ctx); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	r.clk.Step(time.Minute)
	_, err = short.ListWorkspaces(ctx)
	if !api.IsUnauthorized(err) || !strings.Contains(err.Error(), `token "short" has expired`) {
		t.Fatalf("after expiry: %v", err)
	}
	if !hasEntry(r.audit(), "short", "GET /v1/workspaces", "denied", 401) {
		t.Fatalf("the expired token's use is not in the audit log: %+v", r.audit())
	}
	if !hasEntry(r.audit(), "ops", "DELETE /v1/tokens/{token}", "allowed", 204) {
		t.Fatalf("the revoke is not in the audit log")
	}

	// No secret is in the audit log, the engine's log, or /metrics.
	scrape := r.scrape()
	if !strings.Contains(scrape, `mlcompute_api_auth_failures_total{reason="expired"} 1`) {
		t.Fatalf("/metrics does not count the expired token's call:\n%s", grepLines(scrape, "auth_failures"))
	}
	auditRaw, err := os.ReadFile(r.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{fileToken, created.Secret, exp.Secret} {
		for where, text := range map[string]string{"audit log": string(auditRaw), "log": r.logs.String(), "/metrics": scrape} {
			if strings.Contains(text, secret) {
				t.Errorf("a token's secret is in the %s", where)
			}
		}
	}
}

// TestBruteForceOfTokens tries 10,000 random tokens, on reads and on changes: every one
// gets 401, nothing is made, and the audit log does not grow.
func TestBruteForceOfTokens(t *testing.T) {
	r := newAuthRig(t)
	ctx := context.Background()
	if _, err := r.op.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	r.token("real", api.RoleOperator)
	before, err := os.ReadFile(r.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	const tries, workers = 10_000, 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
	)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < tries; i += workers {
				raw := make([]byte, 32)
				_, _ = rand.Read(raw)
				guess := "mlc_" + base64.RawURLEncoding.EncodeToString(raw)
				var req *http.Request
				switch i % 3 {
				case 0:
					req, _ = http.NewRequest("GET", r.url+"/v1/workspaces/lab", nil)
				case 1:
					req, _ = http.NewRequest("POST", r.url+"/v1/workspaces/lab/computes", strings.NewReader(`{"name":"evil","type":"ComputeCluster","vm_size":"Standard_DS3_v2"}`))
				default:
					req, _ = http.NewRequest("POST", r.url+"/v1/tokens", strings.NewReader(`{"name":"evil","role":"operator"}`))
				}
				req.Header.Set("Authorization", "Bearer "+guess)
				res, err := hc.Do(req)
				status := -1
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					status = res.StatusCode
				}
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if statuses[http.StatusUnauthorized] != tries {
		t.Fatalf("statuses of %d random tokens: %v; want all 401", tries, statuses)
	}
	if list, err := r.op.ListComputes(ctx, "lab"); err != nil || len(list) != 0 {
		t.Fatalf("computes after the brute force: %v, %v", list, err)
	}
	if list, err := r.op.ListTokens(ctx); err != nil || len(list) != 2 {
		t.Fatalf("tokens after the brute force: %v, %v", list, err)
	}
	after, err := os.ReadFile(r.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("the audit log grew by %d bytes", len(after)-len(before))
	}
	// The brute force shows in /metrics instead.
	if scrape := r.scrape(); !strings.Contains(scrape, `mlcompute_api_auth_failures_total{reason="unknown"} 10000`+"\n") {
		t.Fatalf("/metrics does not count the 10,000 unknown tokens:\n%s", grepLines(scrape, "auth_failures"))
	}
}

func (r *authRig) scrape() string {
	r.t.Helper()
	req, _ := http.NewRequest("GET", r.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+fileToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		r.t.Fatalf("/metrics: %d", res.StatusCode)
	}
	return string(body)
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestUnixSocketEngineWithoutTokens: with no token file, every caller is the local
// operator, as before tokens had roles, and jobs record it.
func TestEngineWithoutTokensServesEveryoneAsLocal(t *testing.T) {
	srv := newServer(t, server.Options{})
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", clusterSpec("cpu")); err != nil {
		t.Fatal(err)
	}
	job, err := c.SubmitJob(ctx, "lab", api.JobSpec{Compute: "cpu", Command: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	if job.SubmittedBy != "local" {
		t.Fatalf("submitted_by = %q, want local", job.SubmittedBy)
	}
}
