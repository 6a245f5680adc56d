//go:build unix

package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/auth"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/syncbuf"
)

// TestRolesOverTLS runs serve over TLS with the data dir's token file: the token file's
// token makes a contributor and a reader token of one workspace; the contributor applies a
// cluster and submits a job, the reader's submit gets 403 and makes nothing, and the data
// dir's audit log holds both, with no secret in it or in the engine's log.
func TestRolesOverTLS(t *testing.T) {
	dir := shortDir(t)
	logs := &syncbuf.Buffer{}
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
	// The contributor's calls go through a tap that records every byte on the wire.
	tap := newWireTap(t, addr)
	ci, err := Connect(ctx, ConnectOptions{Endpoint: "https://" + tap.addr, Token: secrets[0], DataDir: dir})
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
	wire := tap.bytes()
	if len(wire) == 0 || wire[0] != 0x16 { // a TLS handshake record
		t.Fatalf("the tap saw %d bytes, starting %q; want a TLS handshake", len(wire), wire[:min(len(wire), 8)])
	}
	if bytes.Contains(wire, []byte(secrets[0])) || bytes.Contains(wire, []byte("Bearer")) || bytes.Contains(wire, []byte("/v1/workspaces")) {
		t.Error("the contributor's token or request crossed the wire in clear")
	}
	for _, s := range append(secrets, fileToken) {
		if bytes.Contains(raw, []byte(s)) || strings.Contains(logs.String(), s) {
			t.Error("a token's secret is in audit.log or the engine's log")
		}
	}
}

// TestWireTapSeesPlainHTTP is the tap's control: without TLS the token is on the wire, so
// TestRolesOverTLS's check of the tap can fail.
func TestWireTapSeesPlainHTTP(t *testing.T) {
	dir := shortDir(t)
	addr := startTCP(t, Options{DataDir: dir, Listen: "tcp://127.0.0.1:0", Token: "plain-s3cret"})
	tap := newWireTap(t, addr)
	if _, err := mustClient(t, "http://"+tap.addr, "plain-s3cret").Status(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(tap.bytes(), []byte("Bearer plain-s3cret")) {
		t.Fatalf("the tap did not see the plain request: %q", tap.bytes())
	}
}

// wireTap relays TCP connections to a target and records what the client sends.
type wireTap struct {
	addr string
	mu   sync.Mutex
	sent bytes.Buffer
}

func newWireTap(t *testing.T, target string) *wireTap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tap := &wireTap{addr: ln.Addr().String()}
	var (
		wg     sync.WaitGroup
		connMu sync.Mutex
		conns  []net.Conn
	)
	// Idle keep-alive connections are closed here rather than after the client's timeout.
	t.Cleanup(func() {
		ln.Close()
		connMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connMu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			connMu.Lock()
			conns = append(conns, client, server)
			connMu.Unlock()
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(io.MultiWriter(server, tap), client)
				server.Close()
			}()
			go func() {
				defer wg.Done()
				_, _ = io.Copy(client, server)
				client.Close()
			}()
		}
	}()
	return tap
}

func (w *wireTap) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent.Write(p)
}

func (w *wireTap) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.sent.Bytes())
}
