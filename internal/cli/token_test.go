package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// The token commands and the audit log, through the CLI as an operator and as the tokens
// it makes.
func TestTokenAndAuditCommands(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{Token: "operator-s3cret"})
	ctx := context.Background()
	op := e.Client(t, "operator-s3cret")
	if _, err := op.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := op.CreateCompute(ctx, "lab", api.ComputeSpec{Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MLCOMPUTE_TOKEN", "operator-s3cret")
	for _, bad := range [][]string{
		{"token", "create", "--name", "x", "--role", "admin"},
		{"token", "create", "--role", "reader"},
		{"token", "create", "--name", "x", "--role", "reader", "--expires", "soon"},
		{"token", "create", "--name", "x", "--role", "reader", "--expires", "0d"},
	} {
		if _, _, err := runCLI(e, bad...); err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("%v: %v; want an error naming the flag", bad, err)
		}
	}
	secret, errOut, err := runCLI(e, "token", "create", "--name", "ci", "--role", "contributor", "--workspace", "lab", "--expires", "30d")
	if err != nil || !strings.Contains(errOut, "shown this once") {
		t.Fatalf("token create: %v (%q)", err, errOut)
	}
	secret = strings.TrimSpace(secret)
	list, _, err := runCLI(e, "token", "list")
	if err != nil || !strings.Contains(list, "ci ") || !strings.Contains(list, "contributor") || !strings.Contains(list, "token-file") || strings.Contains(list, secret) {
		t.Fatalf("token list: %v\n%s", err, list)
	}

	// The contributor submits a job; job show names it. It may not list tokens.
	t.Setenv("MLCOMPUTE_TOKEN", secret)
	id, _, err := runCLI(e, "job", "submit", "--workspace", "lab", "--compute", "cpu", "--", "train")
	if err != nil {
		t.Fatalf("job submit as the contributor: %v", err)
	}
	show, _, err := runCLI(e, "job", "show", "--workspace", "lab", strings.TrimSpace(id))
	if err != nil || !strings.Contains(show, "submitted by: ci") {
		t.Fatalf("job show: %v\n%s", err, show)
	}
	if _, _, err := runCLI(e, "token", "list"); err == nil || !strings.Contains(err.Error(), "lacks the permission admin") {
		t.Fatalf("token list as a contributor: %v", err)
	}

	t.Setenv("MLCOMPUTE_TOKEN", "operator-s3cret")
	out, _, err := runCLI(e, "audit", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var audit api.AuditList
	if err := json.Unmarshal([]byte(out), &audit); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, en := range audit.Entries {
		seen = append(seen, en.Token+" "+en.Result+" "+en.Action)
	}
	joined := strings.Join(seen, "\n")
	for _, want := range []string{"token-file allowed POST /v1/tokens", "ci allowed POST /v1/workspaces/{workspace}/jobs", "ci denied GET /v1/tokens"} {
		if !strings.Contains(joined, want) {
			t.Errorf("audit lacks %q:\n%s", want, joined)
		}
	}
	if table, _, err := runCLI(e, "audit"); err != nil || !strings.Contains(table, "TOKEN") || strings.Contains(table, secret) {
		t.Fatalf("audit table: %v\n%s", err, table)
	}

	if out, _, err := runCLI(e, "token", "revoke", "ci"); err != nil || !strings.Contains(out, `token "ci" revoked`) {
		t.Fatalf("token revoke: %v %q", err, out)
	}
	t.Setenv("MLCOMPUTE_TOKEN", secret)
	if _, _, err := runCLI(e, "job", "list", "--workspace", "lab"); err == nil || !strings.Contains(err.Error(), "unknown or revoked token") {
		t.Fatalf("a revoked token: %v", err)
	}
}
