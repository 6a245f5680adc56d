//go:build unix

package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// TestE2E_TokenRoles runs `mlcompute serve` over TLS on loopback, as a team's shared engine:
// the operator (the data dir's api.token) makes a contributor and a reader token of one
// workspace with the CLI; terraform with the reader's token is refused naming the
// permission and makes nothing; with the contributor's it applies a cluster, which then
// runs the contributor's job; the audit log holds both, and names the job's submitter.
func TestE2E_TokenRoles(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	serve := exec.Command(filepath.Join(binDir, "mlcompute"), "serve", "--listen", "tcp://"+addr, "--tls")
	serve.Env = u.env
	var serveLog bytes.Buffer
	serve.Stdout, serve.Stderr = &serveLog, &serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	endpoint := "https://" + addr
	// The CLI and the provider on this machine find the token and the CA in the data dir.
	as := func(token string, name string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = u.workDir
		cmd.Env = append(append([]string{}, u.env...), "MLCOMPUTE_ENDPOINT="+endpoint, "MLCOMPUTE_TOKEN="+token)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if exitErr, ok := err.(*exec.ExitError); ok {
			return out.String(), exitErr.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), 0
	}
	cli := filepath.Join(binDir, "mlcompute")
	u.waitFor("serve answers", 30*time.Second, func() bool { _, code := as("", cli, "status"); return code == 0 })

	newToken := func(name, role string) string {
		out, code := as("", cli, "token", "create", "--name", name, "--role", role, "--workspace", "e2e-team", "-o", "json")
		if code != 0 {
			t.Fatalf("token create %s: exit %d: %s", name, code, out)
		}
		var created api.TokenCreated
		decodeJSON(t, out, &created)
		return created.Secret
	}
	contributor, reader := newToken("ci", api.RoleContributor), newToken("viewer", api.RoleReader)

	u.writeConfig(strings.Replace(clusterConfig, `provider "mlcompute" {}`, fmt.Sprintf("provider \"mlcompute\" {\n  endpoint = %q\n}", endpoint), 1))
	out, code := as(reader, terraform, "apply", "-auto-approve", "-no-color")
	// terraform wraps its diagnostics' lines.
	if code == 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), `lacks the permission write on workspace "e2e-team"`) {
		t.Fatalf("terraform apply with the reader's token: exit %d; want a refusal naming the permission:\n%s", code, out)
	}
	if out, code := as("", cli, "compute", "list", "--workspace", "e2e-team"); code == 0 {
		t.Fatalf("the reader's apply made the workspace:\n%s", out)
	}
	if out, code := as(contributor, terraform, "apply", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("terraform apply with the contributor's token: exit %d:\n%s", code, out)
	}
	id, code := as(contributor, cli, "job", "submit", "--workspace", "e2e-team", "--compute", "cpu", "--", "true")
	if code != 0 {
		t.Fatalf("job submit: exit %d: %s", code, id)
	}
	id = strings.TrimSpace(id)
	if out, code := as(reader, cli, "job", "submit", "--workspace", "e2e-team", "--compute", "cpu", "--", "true"); code == 0 || !strings.Contains(out, "lacks the permission") {
		t.Fatalf("job submit with the reader's token: exit %d: %s", code, out)
	}
	var job api.Job
	u.waitFor("the contributor's job completes", 90*time.Second, func() bool {
		out, code := as(reader, cli, "job", "show", "--workspace", "e2e-team", id, "-o", "json")
		if code != 0 {
			t.Fatalf("job show as the reader: exit %d: %s", code, out)
		}
		decodeJSON(t, out, &job)
		return api.Terminal(job.Status)
	})
	if job.Status != api.JobCompleted || job.SubmittedBy != "ci" {
		t.Fatalf("job %s: status %s, submitted_by %q", id, job.Status, job.SubmittedBy)
	}
	if jobs, code := as("", cli, "job", "list", "--workspace", "e2e-team", "-o", "json"); code != 0 || strings.Count(jobs, `"id"`) != 1 {
		t.Fatalf("jobs: exit %d, want one:\n%s", code, jobs)
	}

	out, code = as("", cli, "audit", "-o", "json")
	if code != 0 {
		t.Fatalf("audit: exit %d: %s", code, out)
	}
	var audit api.AuditList
	decodeJSON(t, out, &audit)
	var seen []string
	for _, e := range audit.Entries {
		seen = append(seen, e.Token+" "+e.Result+" "+e.Action)
	}
	all := strings.Join(seen, "\n") + "\n"
	for _, want := range []string{
		"viewer denied POST /v1/workspaces",
		"ci allowed POST /v1/workspaces",
		"ci allowed POST /v1/workspaces/{workspace}/computes",
		"ci allowed POST /v1/workspaces/{workspace}/jobs",
		"viewer denied POST /v1/workspaces/{workspace}/jobs",
	} {
		if !strings.Contains(all, want+"\n") {
			t.Errorf("the audit log lacks %q:\n%s", want, all)
		}
	}
	for _, secret := range []string{contributor, reader} {
		if strings.Contains(out, secret) || strings.Contains(serveLog.String(), secret) {
			t.Error("a token's secret is in the audit log or the engine's log")
		}
	}
	if out, code := as(contributor, terraform, "destroy", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("terraform destroy with the contributor's token: exit %d:\n%s", code, out)
	}
}
